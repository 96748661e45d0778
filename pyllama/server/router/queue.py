"""The router's ``--models-max`` slots and the FIFO queue of requests waiting for one.

A request for a model that is not loaded joins the queue; requests for the same model
share one entry (``_Waiting``), so together they need one slot. While queued entries
outnumber the free slots, idle models are stopped, least recently used first (``tick``);
the entry at the head of the queue claims the next free slot (``try_claim``) and loads its
model. A busy model (a request in flight) or one a queued entry wants is never stopped,
as llama-server's ``server_lru_sched``. A model holds its slot while loading, loaded, or
on its way out, until its process has exited.

Event-loop only, and never awaits except in ``wait_change``: every method runs to the end
without another task seeing a half-made change. ``notify`` wakes whatever waits for a
change of state (a load, an exit, a request ending).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from pyllama.server.router.entry import ModelEntry

__all__ = ["LoadQueue"]


@dataclass
class _Waiting:
    """Requests queued for one model: they share the one slot its load takes."""

    name: str
    waiters: int = 1
    loading: bool = False  # one of them is loading it now


class LoadQueue:
    def __init__(
        self,
        models: Callable[[], dict[str, ModelEntry]],
        models_max: int,
        stop: Callable[[ModelEntry], None],
    ) -> None:
        self._models = models  # the table's current models (the dict is replaced on reload)
        self.models_max = models_max  # <= 0: no limit
        self._stop = stop  # asks a model's child to exit, without waiting
        self._queue: list[_Waiting] = []
        self._changed = asyncio.Event()

    # ------------------------------------------------------------------ change signal
    def notify(self) -> None:
        """Wake everything waiting for a change of state."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self, timeout: float = 0.2) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    # ------------------------------------------------------------------ slots
    def holding(self) -> list[ModelEntry]:
        """Models that take a slot: loading, loaded, or on their way out."""
        return [e for e in self._models().values() if e.running]

    def has_capacity(self) -> bool:
        return self.models_max <= 0 or len(self.holding()) < self.models_max

    def wanted(self, name: str) -> bool:
        """A queued request waits for ``name``."""
        return self._find(name) is not None

    def victim(self) -> ModelEntry | None:
        """The least recently used model that is loaded, serves no request, is not already
        stopping and is not wanted by a queued request."""
        idle = [
            e
            for e in self._models().values()
            if e.status == "loaded" and e.busy == 0 and not e.stopping and not self.wanted(e.name)
        ]
        return min(idle, key=lambda e: e.last_used, default=None)

    def tick(self) -> None:
        """Stop idle models while queued entries outnumber the free slots (free or being
        freed). Never waits: the stops complete in the background."""
        if self.models_max <= 0 or not self._queue:
            return
        holding = self.holding()
        stopping = sum(1 for e in holding if e.stopping)
        needed = sum(1 for w in self._queue if not w.loading)
        claimed = 0  # claimed a slot, not started yet
        models = self._models()
        for w in self._queue:
            e = models.get(w.name)
            if w.loading and e is not None and not e.running:
                claimed += 1
        free = self.models_max - len(holding) + stopping - claimed
        while free < needed:
            victim = self.victim()
            if victim is None:
                return  # every model is busy: a request ending will tick again
            self._stop(victim)
            free += 1

    # ------------------------------------------------------------------ the queue
    def _find(self, name: str) -> _Waiting | None:
        return next((w for w in self._queue if w.name == name), None)

    def join(self, name: str) -> None:
        w = self._find(name)
        if w is not None:
            w.waiters += 1
        else:
            self._queue.append(_Waiting(name))

    def leave(self, name: str) -> None:
        w = self._find(name)
        if w is not None:
            w.waiters -= 1
            if w.waiters <= 0:
                self._queue.remove(w)

    def try_claim(self, name: str) -> bool:
        """True when ``name`` heads the queue, nobody loads it yet and a slot is free."""
        if not self._queue or self._queue[0].name != name or self._queue[0].loading:
            return False
        if not self.has_capacity():
            return False
        self._queue[0].loading = True
        return True

    def claim_done(self, name: str, ok: bool) -> None:
        w = self._find(name)
        if w is not None and not ok:
            w.loading = False  # back in line
