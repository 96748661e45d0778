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

__all__ = ["SERVER_PIDS", "alive", "free_port", "running_server", "wait_healthy"]


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


SERVER_PIDS: dict[str, int] = {}  # base URL -> process id, for tests that inspect the process


@contextlib.contextmanager
def running_server(
    *args: str, timeout: float = 120.0, env: dict[str, str] | None = None, health: str = "/health"
) -> Iterator[str]:
    """A real ``pyllama-server`` process (``python -m pyllama.server ARGS``) on a free
    port, with ``env`` added to its environment; yields its base URL once /health
    answers 200."""
    import httpx

    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - outlives this frame, closed below
    cmd = [sys.executable, "-m", "pyllama.server", "--port", str(port), *args]
    # cwd elsewhere: from the repository root, `-m` would import the source tree, which
    # has no compiled module, instead of the installed package
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tempfile.gettempdir(),
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
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
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
