"""From engine events to results: a non-streaming answer is the fold of the same event
stream a streaming one sends (``collect``), several streams merge into one (``merged``),
and the pieces every protocol reports (timings, usage, finish reason, token
probabilities, prompt progress).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyllama import _core
from pyllama.engine import EngineError, TaskStream
from pyllama.server.http.errors import APIError
from pyllama.server.state import ServerState

__all__ = [
    "Result",
    "collect",
    "events",
    "finish_reason",
    "merged",
    "prompt_progress",
    "stop_type",
    "timings",
    "token_probs",
    "usage",
]


@dataclass
class Result:
    """One completion folded from its events (n > 1 tasks give one per index)."""

    index: int
    text: list[bytes] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    probs: list[_core.Event] = field(default_factory=list)
    final: _core.Event | None = None

    @property
    def content(self) -> str:
        return b"".join(self.text).decode("utf-8", errors="replace")


async def events(stream: TaskStream, progress: bool = False) -> AsyncIterator[_core.Event]:
    """A task's token and final events (and progress ones if asked); an error event
    raises as an APIError."""
    async for ev in stream:
        if _wanted(ev, progress):
            yield ev


def _wanted(ev: _core.Event, progress: bool = False) -> bool:
    """Whether a reader keeps the event (progress ones only if asked); an error raises."""
    if ev.type == "error":
        raise APIError(500, f"{ev.error_kind}: {ev.message}")
    return ev.type != "progress" or progress


async def _until_disconnect(receive: Any) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


async def _fold(streams: list[TaskStream], n_cmpl: int) -> list[Result]:
    # the streams one after the other, each read whole (one wake-up at its end): every
    # result is needed, and each stream buffers its events until it is read
    out = []
    for stream in streams:
        results = [Result(i) for i in range(n_cmpl)]
        for ev in await stream.rest():
            if not _wanted(ev):
                continue
            r = results[ev.index]
            if ev.type == "token":
                r.text.append(ev.text)
                if ev.token >= 0:
                    r.tokens.append(ev.token)
                    r.probs.append(ev)
            else:
                r.final = ev
        out += results
    return out


async def collect(streams: list[TaskStream], n_cmpl: int, receive: Any = None) -> list[Result]:
    """Fold every stream; a client that disconnects meanwhile cancels them all.

    The fold runs in the caller's task; a watcher task reads ``receive`` and, on a
    disconnect, cancels the caller while it is still in here (one extra task a request,
    where a task per stream and a wait on both cost several)."""
    owner = asyncio.current_task()
    watch = asyncio.ensure_future(_until_disconnect(receive)) if receive else None
    disconnected = False

    def on_disconnect(w: asyncio.Future[None]) -> None:
        nonlocal disconnected
        if not w.cancelled() and w.exception() is None and owner is not None:
            disconnected = True
            owner.cancel()

    if watch is not None:
        watch.add_done_callback(on_disconnect)
    try:
        return await _fold(streams, n_cmpl)
    except asyncio.CancelledError:
        if disconnected:
            raise asyncio.CancelledError("client disconnected") from None
        raise
    except EngineError as e:
        raise APIError(500, str(e)) from e
    finally:
        if watch is not None:  # done here: a disconnect from now on is not ours to act on
            watch.remove_done_callback(on_disconnect)
            watch.cancel()
        for s in streams:
            s.close()


def timings(ev: _core.Event) -> dict[str, float]:
    """llama-server's timings from a final, token or progress event (counts and times so
    far). The generation rate is over the decode steps: the first token comes from the
    prompt's last batch, so n tokens took n - 1 steps."""
    if ev.type == "progress":
        prompt_n, pred_n = ev.n_processed - ev.n_cached, 0
        pms, gms = ev.t_prompt_ms, 0.0
    else:
        prompt_n, pred_n = ev.n_prompt - ev.n_cached, ev.n_predicted
        pms, gms = ev.t_prompt_ms, ev.t_predicted_ms
    steps = max(0, pred_n - 1)
    out = {
        "cache_n": ev.n_cached,
        "prompt_n": prompt_n,
        "prompt_ms": pms,
        "prompt_per_token_ms": pms / prompt_n if prompt_n and pms > 0 else 0.0,
        "prompt_per_second": 1e3 * prompt_n / pms if pms > 0 else 0.0,
        "predicted_n": pred_n,
        "predicted_ms": gms,
        "predicted_per_token_ms": gms / steps if steps and gms > 0 else 0.0,
        "predicted_per_second": 1e3 * steps / gms if steps and gms > 0 else 0.0,
    }
    if ev.n_shared > 0:  # pyllama's: of cache_n, tokens copied from another slot's prefix
        out["shared_n"] = ev.n_shared
    if ev.type != "progress" and ev.n_draft > 0:  # speculative decoding, as llama-server
        out["draft_n"] = ev.n_draft
        out["draft_n_accepted"] = ev.n_draft_accepted
    return out


def prompt_progress(ev: _core.Event) -> dict[str, Any]:
    """llama-server's ``prompt_progress`` object from a progress event."""
    return {
        "total": ev.n_prompt,
        "cache": ev.n_cached,
        "processed": ev.n_processed,
        "time_ms": int(ev.t_prompt_ms),
    }


def finish_reason(final: _core.Event) -> str:
    return "stop" if final.stop in ("eos", "word") else "length"


def stop_type(final: _core.Event) -> str:
    return {"eos": "eos", "word": "word", "limit": "limit", "context": "limit"}.get(
        final.stop, "none"
    )


def usage(finals: Sequence[_core.Event], n_prompt: int) -> dict[str, Any]:
    completion = sum(f.n_predicted for f in finals)
    cached = max((f.n_cached for f in finals), default=0)
    return {
        "completion_tokens": completion,
        "prompt_tokens": n_prompt,
        "total_tokens": completion + n_prompt,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def token_probs(state: ServerState, ev: _core.Event, post: bool) -> dict[str, Any]:
    """llama-server's probability entry for one generated token."""
    model = state.model
    assert model is not None

    def piece(tok: int) -> tuple[str, list[int]]:
        b = model.token_to_piece(tok, special=True)
        return b.decode("utf-8", errors="replace"), list(b)

    text, raw = piece(ev.token)
    if post:
        top = []
        for tok, lp in ev.top:
            t, b = piece(tok)
            top.append({"id": tok, "token": t, "bytes": b, "prob": math.exp(lp)})
        return {
            "id": ev.token,
            "token": text,
            "bytes": raw,
            "prob": math.exp(ev.logprob),
            "top_probs": top,
        }
    top = []
    for tok, lp in ev.top:
        t, b = piece(tok)
        top.append({"id": tok, "token": t, "bytes": b, "logprob": lp})
    return {"id": ev.token, "token": text, "bytes": raw, "logprob": ev.logprob, "top_logprobs": top}


async def merged(
    streams: list[TaskStream], progress: bool = False
) -> AsyncIterator[tuple[int, _core.Event]]:
    """Events of several tasks as they come: (task position, event). Closing the
    iterator (client gone) cancels every task."""
    if len(streams) == 1:
        try:
            async for ev in events(streams[0], progress):
                yield 0, ev
        finally:
            streams[0].close()
        return
    queue: asyncio.Queue[tuple[int, _core.Event | BaseException | None]] = asyncio.Queue()

    async def pump(i: int, s: TaskStream) -> None:
        try:
            async for ev in events(s, progress):
                queue.put_nowait((i, ev))
        except Exception as e:  # handed to the consumer
            queue.put_nowait((i, e))
        queue.put_nowait((i, None))

    pumps = [asyncio.ensure_future(pump(i, s)) for i, s in enumerate(streams)]
    try:
        left = len(streams)
        while left:
            i, item = await queue.get()
            if item is None:
                left -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield i, item
    finally:
        for p in pumps:
            p.cancel()
        for s in streams:
            s.close()
