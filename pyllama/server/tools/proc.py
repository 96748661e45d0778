"""Running one subprocess for a built-in tool: bounded output, a deadline, early stop.

Arguments are always an argv list, never a shell string built here; a tool that wants a
shell (exec_shell_command) passes ``["sh", "-c", command]`` itself."""

from __future__ import annotations

import codecs
import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

READ_CHUNK = 4096
# after a kill, how long to wait for the pipe to close: a process that left the group
# (setsid) may hold it open forever, and the call must still return
KILL_GRACE_S = 2.0
TASKKILL_TIMEOUT_S = 5.0  # Windows: taskkill walks the process table, usually in ms


@dataclass
class ExecResult:
    output: bytes = b""
    exit_code: int = -1
    timed_out: bool = False
    truncated: bool = False  # output past max_output was dropped


def taskkill_tree(pid: int) -> None:
    """Windows: kill ``pid`` and its descendants. There are no process groups to signal;
    ``taskkill /T`` finds the tree by parent ids, so call it while ``pid`` still lives."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["taskkill", "/F", "/T", "/PID", str(pid)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TASKKILL_TIMEOUT_S,
        )


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child and everything it started: ``sh -c "a; b"`` keeps a child that
    holds the output pipe open after ``sh`` itself is gone."""
    if os.name == "posix":
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:
        taskkill_tree(proc.pid)
    with contextlib.suppress(OSError):
        proc.kill()


def _feed_stdin(proc: subprocess.Popen[bytes], data: bytes) -> None:
    # a short write is not an error by itself, the exit code decides
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        proc.stdin.write(data)
    with contextlib.suppress(OSError):
        proc.stdin.close()


def _pump(pipe: IO[bytes], chunks: queue.Queue[bytes | None]) -> None:
    # this thread owns the pipe and closes it: closing it from another thread while a
    # read is blocked on it could hand the fd number to an unrelated file
    try:
        while True:
            try:
                data = os.read(pipe.fileno(), READ_CHUNK)
            except OSError:
                break
            if not data:
                break
            chunks.put(data)
    finally:
        with contextlib.suppress(OSError):
            pipe.close()
        chunks.put(None)


def run_subprocess(
    args: list[str],
    max_output: int,
    timeout_s: float,
    on_chunk: Callable[[str], bool] | None = None,
    *,
    combine_stderr: bool = True,
    cwd: str = "",
    stdin_data: bytes | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ExecResult:
    """Run ``args`` and collect at most ``max_output`` bytes of its output.

    ``on_chunk`` sees each piece of output as it arrives (decoded as UTF-8); returning
    False kills the process. ``should_stop`` is polled while the process is silent, so a
    client that has gone stops a command that prints nothing. Past the deadline the
    process tree is killed and ``timed_out`` is set. A signal death reports exit code 1,
    a failed spawn -1, as llama-server."""
    res = ExecResult()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # an unread stderr pipe would block the child once full
            stderr=subprocess.STDOUT if combine_stderr else subprocess.DEVNULL,
            cwd=cwd or None,
            start_new_session=os.name == "posix",  # its own group, so _kill_tree gets all of it
        )
    except (OSError, ValueError):
        res.output = b"failed to spawn process"
        return res

    assert proc.stdout is not None
    if stdin_data is not None:
        threading.Thread(target=_feed_stdin, args=(proc, stdin_data), daemon=True).start()
    chunks: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, chunks), daemon=True).start()

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = bytearray()
    truncated = False
    deadline = time.monotonic() + timeout_s
    killed_at: float | None = None

    def kill() -> None:
        nonlocal killed_at
        if killed_at is None:
            killed_at = time.monotonic()
            _kill_tree(proc)

    while True:
        now = time.monotonic()
        if killed_at is not None and now - killed_at > KILL_GRACE_S:
            break
        if killed_at is None and now >= deadline:
            res.timed_out = True
            kill()
        if killed_at is None and should_stop is not None and should_stop():
            kill()
        try:
            data = chunks.get(timeout=0.1)
        except queue.Empty:
            continue
        if data is None:
            break
        if truncated or killed_at is not None:
            continue  # keep draining, else the child blocks on a full pipe
        room = max_output - len(out)
        if len(data) > room:
            data = data[: max(room, 0)]
            truncated = True
        out += data
        if on_chunk is not None and data and not on_chunk(decoder.decode(data)):
            kill()

    # the output is closed, but the process may live on (`exec >&-; sleep 100`)
    while killed_at is None and proc.poll() is None:
        if time.monotonic() >= deadline:
            res.timed_out = True
            kill()
        elif should_stop is not None and should_stop():
            kill()
        else:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
    if killed_at is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE_S)
    if on_chunk is not None and killed_at is None:
        tail = decoder.decode(b"", final=True)  # a sequence cut at the very end
        if tail:
            on_chunk(tail)

    code = proc.returncode
    res.exit_code = -1 if code is None else (code if code >= 0 else 1)
    res.truncated = truncated
    res.output = bytes(out) + (b"\n[output truncated]" if truncated else b"")
    return res
