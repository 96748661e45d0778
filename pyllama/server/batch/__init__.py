"""OpenAI's Files and Batch API: the store on disk (``store``), streamed uploads
(``upload``), the runner that serves each line through the server's own routes (``runner``)
and the endpoints (``routes``). ``Batches`` is what the app holds: started with the app's
lifespan, stopped with it (a batch left running resumes at the next start)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pyllama.server.batch.runner import BatchRunner
from pyllama.server.batch.store import BatchStore
from pyllama.server.settings import BatchOptions

__all__ = ["Batches"]


class Batches:
    def __init__(self, options: BatchOptions, app: Any, n_slots: int, port: int) -> None:
        self.store = BatchStore(options.directory(port))
        parallel = options.parallel or max(1, n_slots // 2)
        self.runner = BatchRunner(self.store, app, parallel, options.window_seconds)
        self.runner.priority = options.priority
        self.runner.max_lines = options.max_lines
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self.runner.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self.store.close()
