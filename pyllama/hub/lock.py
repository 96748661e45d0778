"""One writer per cached file across processes: replicas on one node, or pods sharing a
cache volume, fetch the same blob at the same time. The lock is an OS file lock on a file
under ``<cache>/.locks/`` (where the hub's own tools keep theirs), so a process that dies
releases it, and a waiter takes the finished file instead of writing the same partial
file beside the first writer."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["held"]

POLL_S = 0.2  # how often a waiter tries again (and checks its cancel)

if sys.platform == "win32":
    import msvcrt

    def _try(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _release(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _release(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def held(path: Path, cancelled: Callable[[], bool], error: Exception) -> Iterator[None]:
    """Hold the lock file ``path`` (made if missing) for the block; while another process
    holds it, wait, raising ``error`` once ``cancelled()`` says so. Non-blocking tries
    in a loop, not a blocking call, so that a cancel is seen while waiting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while not _try(fd):
            if cancelled():
                raise error
            time.sleep(POLL_S)
        try:
            yield
        finally:
            _release(fd)
    finally:
        os.close(fd)
