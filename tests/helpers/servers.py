"""Real ``pyllama-server`` processes for the tests: a free port, a server started with given
flags and stopped afterwards, and the process id of each running one."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "PYLLAMA_SERVER",
    "SERVER_PIDS",
    "alive",
    "free_port",
    "running_server",
    "start_process",
    "stop_process",
    "wait_healthy",
]

PYLLAMA_SERVER = [sys.executable, "-m", "pyllama.server"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until ``url``/health answers 200; AssertionError if ``proc`` exits or time runs out."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"the server exited {proc.returncode}"
        try:
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not become healthy"
        time.sleep(0.1)


def start_process(
    cmd: list[str],
    stdout: Any = subprocess.DEVNULL,
    stderr: Any = subprocess.STDOUT,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen, str]:
    """``cmd --port P`` (a server binary or PYLLAMA_SERVER with flags) on a free port, its
    output to ``stdout``/``stderr``, ``env`` added; the process and its base URL, not yet
    waited for. Run outside the source tree: from the repository root, ``-m`` would import
    the source tree, which has no compiled module, instead of the installed package."""
    port = free_port()
    proc = subprocess.Popen(
        [*cmd, "--port", str(port)],
        stdout=stdout,
        stderr=stderr,
        cwd=tempfile.gettempdir(),
        env={**os.environ, **(env or {})},
    )
    return proc, f"http://127.0.0.1:{port}"


SERVER_PIDS: dict[str, int] = {}  # base URL -> process id, for tests that inspect the process


@contextlib.contextmanager
def running_server(
    *args: str, timeout: float = 120.0, env: dict[str, str] | None = None, health: str = "/health"
) -> Iterator[str]:
    """A real ``pyllama-server`` process (``python -m pyllama.server ARGS``) on a free
    port, with ``env`` added to its environment; yields its base URL once /health
    answers 200."""
    import httpx

    log = tempfile.TemporaryFile()  # noqa: SIM115 - outlives this frame, closed below
    proc, url = start_process([*PYLLAMA_SERVER, *args], stdout=log, env=env)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(
                    f"server exited {proc.returncode}:\n{log.read().decode()[-4000:]}"
                )
            try:
                if httpx.get(url + health, timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("pyllama-server did not become healthy")
            time.sleep(0.1)
        SERVER_PIDS[url] = proc.pid
        yield url
    finally:
        SERVER_PIDS.pop(url, None)
        stop_process(proc)
        log.close()


@contextlib.contextmanager
def healthy_process(cmd: list[str], log: Any) -> Iterator[tuple[subprocess.Popen, str]]:
    """``cmd`` started as start_process with its output to ``log`` (an open named file),
    yielded with its URL once healthy (a failed start raises with the log's tail) and
    stopped on exit, so the whole log can be read after the block."""
    proc, url = start_process(cmd, stdout=log)
    try:
        try:
            wait_healthy(url, proc)
        except AssertionError as e:
            raise AssertionError(f"{e}:\n{Path(log.name).read_text()[-3000:]}") from None
        yield proc, url
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds; reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
