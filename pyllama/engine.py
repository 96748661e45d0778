"""The engine from Python: ``AsyncEngine`` for asyncio services, ``Engine.generate`` for scripts.

The C++ engine runs its own thread and never touches a Python object. When it has
events it sends one byte on a socket that ``AsyncEngine`` owns (a ``socket.socketpair``
made for the running loop), and the loop, on wake-up, drains every task's events at once
into per-task ``asyncio.Queue`` s. So there is no Python thread per stream, and the event
loop only holds the GIL to move already-built events around. A socket because every loop
can wait on one: selector loops and uvloop watch it with ``add_reader``; Windows' Proactor
loop, which has no ``add_reader``, awaits ``sock_recv`` on it in one task per engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Protocol

from pyllama import _core

__all__ = [
    "AsyncEngine",
    "EngineError",
    "RequestObserver",
    "TaskStream",
    "default_threads",
    "make_task",
    "open_engine",
]

Event = _core.Event


class EngineError(RuntimeError):
    """A task ended with an error event (decode failure, shutdown...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def default_threads() -> int:
    """CPUs this process may run on (the affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def open_engine(
    model: str | _core.Model, *, n_threads: int | None = None, **kwargs: Any
) -> _core.Engine:
    """A ``_core.Engine`` for a model path or a loaded Model (keywords as ``_core.Engine``)."""
    if isinstance(model, str):
        model = _core.Model(model)
    n = n_threads or default_threads()
    kwargs.setdefault("n_threads_batch", n)
    return _core.Engine(model, n_threads=n, **kwargs)


def make_task(
    prompt: Sequence[int],
    *,
    n_predict: int = -1,
    stop: Sequence[str] = (),
    sampling: _core.SamplingParams | None = None,
    **fields: Any,
) -> _core.TaskParams:
    """A completion TaskParams; other TaskParams fields by keyword (n_probs, n_cmpl...)."""
    t = _core.TaskParams()
    t.prompt = list(prompt)
    t.n_predict = n_predict
    t.stop = list(stop)
    if sampling is not None:
        t.sampling = sampling
    for name, value in fields.items():
        if not hasattr(t, name):
            raise TypeError(f"unknown task field '{name}'")
        setattr(t, name, value)
    return t


class RequestObserver(Protocol):
    """Told of each task's timings by ``AsyncEngine`` (on the event loop, so no locks):
    the server's /metrics histograms. Times are ``time.perf_counter()`` seconds."""

    def first_token(self, stream: TaskStream, now: float) -> None:
        """The task's first token event reached the event loop."""

    def tokens(self, stream: TaskStream, n: int, now: float) -> None:
        """``n`` more token events of the task reached the event loop together, after the
        drain that brought its first one (inter-token latency)."""

    def finished(self, stream: TaskStream, last: Event | None, now: float) -> None:
        """The task's last event (final or error) reached the event loop; ``last`` is
        ``None`` when it was cancelled before that (its stream closed early)."""


class TaskStream:
    """Async iterator over one task's events. Closing it early cancels the task.

    ``t_submit`` / ``t_first`` (``time.perf_counter()``: submitted, first token event
    drained) and ``adapters`` (the LoRA adapters, by index, that the task uses with a
    non-zero scale) are what /metrics reads; ``ended`` turns true when the task's last
    event reaches the event loop (or it is cancelled), before the reader takes it."""

    def __init__(
        self,
        owner: AsyncEngine,
        task_id: int,
        t_submit: float = 0.0,
        adapters: tuple[int, ...] = (),
    ) -> None:
        self._owner = owner
        self.task_id = task_id
        self._queue: asyncio.Queue[list[Event]] = asyncio.Queue()
        self._buffer: list[Event] = []
        # rest()'s list while it waits: the drain extends it and queues it once, at the end
        self._hold: list[Event] | None = None
        self._done = False
        self.t_submit = t_submit
        self.t_first: float | None = None
        self.adapters: tuple[int, ...] = adapters
        self.ended = False

    def __aiter__(self) -> TaskStream:
        return self

    async def __anext__(self) -> Event:
        if not self._buffer:
            if self._done:
                raise StopAsyncIteration
            self._buffer = list(reversed(await self._queue.get()))
        ev = self._buffer.pop()
        if ev.done:
            self._done = True
            self._owner._forget(self.task_id)
        return ev

    async def rest(self) -> list[Event]:
        """Every event still to come, the last one included, for a reader that wants the
        whole answer: the reader is woken once, when the task ends, where iterating wakes it
        at every decode step (with many streams that is most of the event loop's work)."""
        out = list(reversed(self._buffer))
        self._buffer.clear()
        if self._done:
            return out
        while not self._queue.empty():
            out += self._queue.get_nowait()
        if not (out and out[-1].done):
            self._hold = out
            try:
                out = await self._queue.get()
            except BaseException:  # cancelled: what came meanwhile (out, held) stays readable
                while not self._queue.empty():
                    self._queue.get_nowait()  # the held list itself, queued as it was cancelled
                self._buffer = list(reversed(out))
                raise
            finally:
                self._hold = None
        self._done = True
        self._owner._forget(self.task_id)
        return out

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Cancel the task if it is still running; its slot is freed at once."""
        if not self._done:
            self._done = True
            self._buffer.clear()
            self._owner._forget(self.task_id)
            self._owner.engine.cancel(self.task_id)
            if not self.ended:  # cancelled before its last event arrived
                self._owner._ended(self, None, time.perf_counter())

    async def __aenter__(self) -> TaskStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # an abandoned stream must not keep its slot
        if not self._done:
            with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to free
                self._owner.engine.cancel(self.task_id)


class AsyncEngine:
    """asyncio front of a ``_core.Engine``: ``submit(task)`` returns a ``TaskStream``."""

    def __init__(self, engine: _core.Engine, observer: RequestObserver | None = None) -> None:
        self.engine = engine
        self.observer = observer
        self._streams: dict[int, TaskStream] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: socket.socket | None = None  # our end of the engine's wake-up socket
        self._waker: asyncio.Task[None] | None = None  # its reader on a Proactor loop
        self._n_lora = len(engine.lora_paths)

    @classmethod
    def open(cls, model: str | _core.Model, **kwargs: Any) -> AsyncEngine:
        return cls(open_engine(model, **kwargs))

    def _attach(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._detach()
        rsock, wsock = socket.socketpair()
        rsock.setblocking(False)
        try:
            self.engine.set_notify_socket(wsock.fileno())  # the engine keeps a duplicate
        finally:
            wsock.close()
        self._wake = rsock
        try:
            loop.add_reader(rsock, self._on_wake)
        except NotImplementedError:  # the Proactor loop (Windows): no readiness callbacks
            self._waker = loop.create_task(self._wake_task(rsock), name="pyllama-engine-wake")
        self._loop = loop

    def _detach(self) -> None:
        # the engine lets go of its socket first: nothing rings a socket being closed
        self.engine.set_notify_socket(-1)
        live_loop = self._loop is not None and not self._loop.is_closed()
        if self._waker is not None and live_loop:
            # the task closes the socket once its read is cancelled: closed under a pending
            # read, Windows' select() would fail on it (WinError 10038)
            self._waker.cancel()
        else:
            if self._wake is not None and live_loop:
                self._loop.remove_reader(self._wake)
            if self._wake is not None:
                self._wake.close()
        self._waker = None
        self._wake = None
        self._loop = None

    def __del__(self) -> None:  # dropped without close(): its socket must not linger
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to free
            self._detach()

    def _on_wake(self) -> None:
        # empty the socket before take_ready (an event after it rings again): it holds one
        # byte, as the engine rings once until the next take_ready, so one read does
        try:
            if self._wake is not None:
                self._wake.recv(4096)
        except (BlockingIOError, InterruptedError):
            pass
        self._drain()

    async def _wake_task(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            while await loop.sock_recv(sock, 4096):  # b"": the socket was closed
                try:
                    self._drain()
                except Exception as e:  # as a failing add_reader callback: reported, not fatal
                    loop.call_exception_handler(
                        {"message": "pyllama engine drain failed", "exception": e}
                    )
        finally:
            sock.close()

    def _drain(self) -> None:
        # Runs in the event loop after a wake-up (or from live()). The timings cost a
        # clock read per wake-up and, with an observer, a scan of each task's new events.
        now = time.perf_counter()
        for task_id, events in self.engine.take_ready():
            stream = self._streams.get(task_id)
            if stream is None:
                continue
            if stream.t_first is None:
                for ev in events:
                    if ev.type == "token":
                        stream.t_first = now
                        if self.observer is not None:
                            self.observer.first_token(stream, now)
                        break
            elif self.observer is not None:
                n = sum(1 for ev in events if ev.type == "token")
                if n:
                    self.observer.tokens(stream, n, now)
            done = events[-1].done
            if done:
                self._ended(stream, events[-1], now)
            if stream._hold is None:
                stream._queue.put_nowait(events)
            else:  # a rest() reader: woken at the end only
                stream._hold += events
                if done:
                    stream._queue.put_nowait(stream._hold)

    def _ended(self, stream: TaskStream, last: Event | None, now: float) -> None:
        stream.ended = True
        if self.observer is not None:
            self.observer.finished(stream, last, now)

    def _forget(self, task_id: int) -> None:
        self._streams.pop(task_id, None)

    def live(self) -> list[TaskStream]:
        """The tasks submitted here whose last event has not arrived yet (events the
        engine has ready are taken first, so a task that ended is not among them)."""
        self._drain()
        return [s for s in self._streams.values() if not s.ended]

    def _adapters(self, task: _core.TaskParams) -> tuple[int, ...]:
        # the scales a task runs with: its own, else the engine's defaults at submit
        if not self._n_lora:
            return ()
        scales = task.lora_scales or self.engine.lora_scales()
        return tuple(i for i, scale in enumerate(scales) if scale != 0.0)

    def submit(self, task: _core.TaskParams) -> TaskStream:
        """Queue a task. Raises at once: OverloadedError, ContextSizeError, ValueError."""
        self._attach()
        now = time.perf_counter()
        task_id = self.engine.submit(task)
        stream = TaskStream(self, task_id, now, self._adapters(task))
        self._streams[task_id] = stream
        return stream

    def submit_many(self, tasks: Sequence[_core.TaskParams]) -> list[TaskStream]:
        """Queue tasks together (all or none): their prompts are evaluated in one batch."""
        self._attach()
        now = time.perf_counter()
        ids = self.engine.submit_many(list(tasks))
        streams = [TaskStream(self, i, now, self._adapters(t)) for i, t in zip(ids, tasks)]
        for stream in streams:
            self._streams[stream.task_id] = stream
        return streams

    async def control(self, cmpl_id: str, action: str) -> tuple[bool, str]:
        """Act on the running task whose ``cmpl_id`` is given (``"reasoning_end"``: end
        its thinking block now): (success, why not). Waits, off the event loop, for the
        engine's loop thread to act between two steps."""
        return await asyncio.to_thread(self.engine.control, cmpl_id, action)

    async def complete(self, task: _core.TaskParams) -> tuple[list[Event], Event]:
        """Run a task to the end: (token events, the last final event). Errors raise."""
        return await self.collect(self.submit(task))

    @staticmethod
    async def collect(stream: TaskStream) -> tuple[list[Event], Event]:
        """Read a stream to its end: (token events, the last final event). Errors raise."""
        tokens: list[Event] = []
        final: Event | None = None
        async with stream:
            for ev in await stream.rest():
                if ev.type == "error":
                    raise EngineError(ev.error_kind, ev.message)
                if ev.type == "token":
                    tokens.append(ev)
                else:
                    final = ev
        assert final is not None
        return tokens, final

    async def stream_text(self, task: _core.TaskParams) -> AsyncIterator[str]:
        """Convenience: the generated text, piece by piece."""
        async with self.submit(task) as stream:
            async for ev in stream:
                if ev.type == "error":
                    raise EngineError(ev.error_kind, ev.message)
                if ev.type == "token" and ev.text:
                    yield ev.text.decode("utf-8", errors="replace")

    def close(self) -> None:
        self._detach()
        self.engine.stop()


def generate(
    engine: _core.Engine, task: _core.TaskParams, timeout_s: float = 600.0
) -> Iterator[Event]:
    """Synchronous: yield a task's events as they come (blocks without the GIL)."""
    task_id = engine.submit(task)
    try:
        while True:
            events = engine.wait(task_id, int(timeout_s * 1000))
            if not events:
                raise TimeoutError(f"no event from task {task_id} in {timeout_s}s")
            for ev in events:
                yield ev
                if ev.done:
                    return
    finally:
        engine.cancel(task_id)  # a no-op when the task has finished
