"""One ``POST /models`` download: ``pyllama.hub.download`` run in a thread of its own.

An explicit download always goes to the hub (``MODEL_ENDPOINT`` / ``HF_ENDPOINT``), even
when the router was started with ``--offline``: llama-server's download child does the
same, and the flag keeps its meaning for everything the router does on its own (listing,
loading, presets' ``hf-repo``), which reads the cache only.

Threads: the download runs in a daemon thread (one stuck on the network never holds up the
router's exit). That thread only writes ``entry.progress`` (one dict item at a time) and
reads ``entry.cancel``; everything else, ``on_progress`` included, runs on the event loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from pyllama import hub
from pyllama.server.router.entry import ModelEntry

__all__ = ["PROGRESS_EVERY_S", "fetch"]

PROGRESS_EVERY_S = 0.1  # on_progress calls per download, at most (and at each file's end)


async def fetch(entry: ModelEntry, on_progress: Callable[[], None]) -> BaseException | None:
    """Download ``entry.name`` into the hub cache; None once done, else the error (a
    ``hub.HubError`` says why, ``hub.DownloadCancelled`` after ``entry.cancel`` was set)."""
    loop = asyncio.get_running_loop()
    last = 0.0

    def progress(url: str, done: int, total: int) -> None:  # in the download's thread
        nonlocal last
        entry.progress[url] = {"done": done, "total": total}
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY_S or done == total:
            last = now
            loop.call_soon_threadsafe(on_progress)

    def run() -> None:
        try:
            hub.download(entry.name, progress, entry.cancel.is_set)  # online, --offline or not
        except BaseException as e:  # handed to the event loop below
            loop.call_soon_threadsafe(done.set_result, e)
        else:
            loop.call_soon_threadsafe(done.set_result, None)

    done: asyncio.Future[BaseException | None] = loop.create_future()
    threading.Thread(target=run, name=f"download {entry.name}", daemon=True).start()
    return await done
