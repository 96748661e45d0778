"""``--threads-http``: llama-server sizes its HTTP thread pool with it. uvicorn serves every
connection on one event loop, so the honest counterpart is the pool of worker threads that
blocking request work runs on (Starlette's sync endpoints and file responses through
anyio, pyllama's ``asyncio.to_thread`` calls): both get N threads. As llama-server's pool,
the N threads of the latter start at once, not on the first requests."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import anyio.to_thread

__all__ = ["use_worker_threads"]


def use_worker_threads(n: int) -> None:
    """Call on the running event loop, before it serves requests."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = n
    pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="pyllama-http")
    started = threading.Barrier(n, timeout=10)  # each task holds its thread until all run
    for _ in range(n):
        pool.submit(started.wait)
    asyncio.get_running_loop().set_default_executor(pool)
