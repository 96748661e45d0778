"""Throughput over a fixed time window, the same for every scraper.

llama-server averages its two throughput gauges over the time since the previous scrape,
and a scrape starts a new window: with an endpoint picker scraping every 50 ms beside
Prometheus every 15 s, each reads the other's leftovers. Here the gauges are the tokens
per second of processing time over the last ``WINDOW_S`` seconds of wall time, whoever
scrapes and how often.

The engine's counters are cumulative, so the window needs their values of ``WINDOW_S``
ago: a sample is kept at most once a second, taken by every scrape and, from the first
scrape on, by a timer on the event loop each second (so a scraper slower than the window
still reads the last ``WINDOW_S`` seconds). The baseline is the newest sample at least
``WINDOW_S`` old, else the oldest kept (the first sample: the server's start, all zeros),
so the window spans ``WINDOW_S`` to ``WINDOW_S`` + 1 seconds once that much has passed.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["WINDOW_S", "ThroughputWindow", "Totals", "rate"]

WINDOW_S = 10.0
_STEP_S = 1.0  # samples kept at most this often


class Totals(NamedTuple):
    """The engine's cumulative prompt and generation counts and times (ms)."""

    n_prompt: float = 0.0
    t_prompt_ms: float = 0.0
    n_predicted: float = 0.0
    t_predicted_ms: float = 0.0


def rate(n: float, ms: float) -> float:
    """Tokens per second of ``n`` tokens in ``ms`` milliseconds (0 for no time)."""
    return 1e3 * n / ms if ms > 0 else 0.0


class ThroughputWindow:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._samples: deque[tuple[float, Totals]] = deque([(clock(), Totals())])
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def add(self, totals: Totals) -> None:
        """Keep ``totals`` as a sample if the newest one is a step old; drop samples that
        no window will use again."""
        now = self._clock()
        if now - self._samples[-1][0] >= _STEP_S:
            self._samples.append((now, totals))
        # the second sample is at least a window old: the first can go
        while len(self._samples) > 1 and now - self._samples[1][0] >= WINDOW_S:
            self._samples.popleft()

    def rates(self, totals: Totals) -> tuple[float, float]:
        """(prompt, generation) tokens per second of processing over the window ending
        now, whose counters are ``totals``."""
        self.add(totals)
        _, base = self._samples[0]
        return (
            rate(totals.n_prompt - base.n_prompt, totals.t_prompt_ms - base.t_prompt_ms),
            rate(
                totals.n_predicted - base.n_predicted,
                totals.t_predicted_ms - base.t_predicted_ms,
            ),
        )

    def keep_sampling(self, read: Callable[[], Totals | None]) -> None:
        """Sample ``read()`` each second on the running loop from now on (``None``: no
        numbers to keep at that moment). Once a loop: later calls on it do nothing."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._loop = loop

        def tick() -> None:
            totals = read()
            if totals is not None:
                self.add(totals)
            self._timer = loop.call_later(_STEP_S, tick)

        self._timer = loop.call_later(_STEP_S, tick)
