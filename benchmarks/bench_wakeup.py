"""The two ways an engine thread can wake an asyncio loop on every OS, compared on this one.

pyllama's engine thread (C++, no GIL) has events for the loop about once a decode step.
Two designs work on Windows as well as Linux:

- ``socket``: the thread sends one byte on a socket the loop owns; the loop wakes on it
  (``add_reader`` on selector loops and uvloop, an awaited ``sock_recv`` on Windows'
  Proactor loop: ``socket-recv`` here). What pyllama does (pyllama/engine.py).
- ``thread``: one Python thread per engine blocks (GIL released) until events are ready,
  then hands the drain to the loop with ``call_soon_threadsafe`` (which itself writes to
  the loop's self-pipe).

The producer here is a thread that, like the engine, does its "step" without the GIL
(``time.sleep``) and then signals; the consumer drains on the loop. Measured, for steps
of 0.2 ms (a small model's decode on 2 cores) and 1 ms: the wake-ups the loop served per
second, and the latency from signal to drain, median and p99. (The producer takes the
GIL to signal, which the C++ engine does not: both designs pay that alike.)

    python benchmarks/bench_wakeup.py [--n 3000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import threading
import time
from typing import Any


class SocketWake:
    """The thread sends a byte (at most one pending); the loop reads and drains."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_drain: Any, reader_task: bool) -> None:
        self.rsock, self.wsock = socket.socketpair()
        self.rsock.setblocking(False)
        self.pending = False
        self.lock = threading.Lock()
        self.on_drain = on_drain
        self.task = None
        if reader_task:
            self.task = loop.create_task(self._reader(loop))
        else:
            loop.add_reader(self.rsock, self._ready)
            self.loop = loop

    def signal(self) -> None:
        with self.lock:
            if self.pending:
                return
            self.pending = True
        self.wsock.send(b"\x01")

    def _take(self) -> None:
        with self.lock:
            self.pending = False
        self.on_drain()

    def _ready(self) -> None:
        try:
            while self.rsock.recv(4096):
                pass
        except BlockingIOError:
            pass
        self._take()

    async def _reader(self, loop: asyncio.AbstractEventLoop) -> None:
        while await loop.sock_recv(self.rsock, 4096):
            self._take()

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        else:
            self.loop.remove_reader(self.rsock)
        self.rsock.close()
        self.wsock.close()


class ThreadWake:
    """A waiter thread blocks on a condition (GIL released), then call_soon_threadsafe."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_drain: Any) -> None:
        self.cond = threading.Condition()
        self.ready = False
        self.busy = False  # a drain is scheduled, not run yet
        self.stopping = False
        self.loop = loop
        self.on_drain = on_drain
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def signal(self) -> None:
        with self.cond:
            self.ready = True
            self.cond.notify()

    def _wait(self) -> None:
        while True:
            with self.cond:
                while not (self.ready and not self.busy) and not self.stopping:
                    self.cond.wait()
                if self.stopping:
                    return
                self.ready = False
                self.busy = True
            self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self.cond:
            self.busy = False
            self.cond.notify()
        self.on_drain()

    def close(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()
        self.thread.join()


def run(kind: str, n: int, step_s: float) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        state = {"drained": 0, "last": 0.0}
        latencies: list[float] = []
        sent: list[float] = []

        def on_drain() -> None:
            now = time.perf_counter()
            if sent:
                latencies.append(now - sent[-1])
            state["drained"] += 1
            if state["drained"] >= n:
                loop.call_soon(done.set)

        if kind == "thread":
            wake: Any = ThreadWake(loop, on_drain)
        else:
            wake = SocketWake(loop, on_drain, reader_task=kind == "socket-recv")

        def producer() -> None:
            while state["drained"] < n and not done.is_set():
                if step_s:
                    time.sleep(step_s)  # the step, GIL released
                sent.append(time.perf_counter())
                wake.signal()

        t0 = time.perf_counter()
        th = threading.Thread(target=producer, daemon=True)
        th.start()
        await done.wait()
        wall = time.perf_counter() - t0
        th.join()
        wake.close()
        lat = sorted(latencies)
        return {
            "kind": kind,
            "step_ms": step_s * 1000,
            "wakeups_per_s": round(state["drained"] / wall),
            "latency_p50_us": round(statistics.median(lat) * 1e6, 1),
            "latency_p99_us": round(lat[int(len(lat) * 0.99)] * 1e6, 1),
        }

    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3000, help="wake-ups per run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for step in (0.0002, 0.001):
        for kind in ("socket", "socket-recv", "thread"):
            rows.append(run(kind, args.n, step))
    for row in rows:
        print(
            json.dumps(row)
            if args.json
            else f"{row['kind']:12} step {row['step_ms']:.1f} ms: {row['wakeups_per_s']:8d} wake-ups/s, "
            f"latency p50 {row['latency_p50_us']:7.1f} us, p99 {row['latency_p99_us']:7.1f} us"
        )


if __name__ == "__main__":
    main()
