"""From a validated request to engine tasks, and from engine events to results.

Every endpoint that generates goes through here: prompts are tokenized as llama-server
does, tasks are submitted together (so a multi-prompt request shares its first batch),
and a non-streaming answer is the fold of the same event stream a streaming one sends.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyllama import _core
from pyllama.engine import EngineError, TaskStream
from pyllama.sampling import make_sampling_params
from pyllama.server.errors import APIError
from pyllama.server.schemas import Sampling
from pyllama.server.state import ServerState

__all__ = [
    "SAMPLING_FIELDS",
    "Options",
    "Result",
    "collect",
    "make_tasks",
    "merged",
    "prompt_progress",
    "stops",
    "submit",
    "timings",
    "tokenize_prompts",
]

SAMPLING_FIELDS = [
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "xtc_probability",
    "xtc_threshold",
    "dynatemp_range",
    "dynatemp_exponent",
    "repeat_last_n",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "dry_sequence_breakers",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "top_n_sigma",
    "min_keep",
    "ignore_eos",
    "samplers",
]


def _tokenize_one(model: _core.Model, prompt: Any) -> list[int]:
    if isinstance(prompt, dict):  # llama-server's JSON prompt object
        if prompt.get("multimodal_data"):
            raise APIError(400, "multimodal data is not supported by this model")
        parts = prompt.get("content")
        prompt = prompt.get("prompt_string")
        if prompt is None and isinstance(parts, list):  # {"content": [text parts]}
            prompt = parts
        if isinstance(prompt, list):
            if not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in prompt):
                raise APIError(400, "a prompt's content parts must be text parts")
            prompt = "".join(p["text"] for p in prompt)
        if not isinstance(prompt, str):
            raise APIError(400, "a JSON prompt needs a string 'prompt_string' or 'content'")
    if isinstance(prompt, str):
        return model.tokenize(prompt, True, True)
    tokens: list[int] = []
    for i, piece in enumerate(prompt):
        if isinstance(piece, str):  # mixed: only a leading string gets BOS
            tokens += model.tokenize(piece, i == 0, True)
        elif isinstance(piece, int) and not isinstance(piece, bool):
            if not 0 <= piece < model.n_vocab:
                raise APIError(400, f"token id {piece} is out of range [0, {model.n_vocab})")
            tokens.append(piece)
        else:
            raise APIError(400, "a prompt array holds token ids and strings only")
    return tokens


def tokenize_prompts(model: _core.Model, prompt: Any) -> list[list[int]]:
    """llama-server's rules: a string, a token array or a mixed array is one prompt; an
    array of strings or arrays is several."""
    if isinstance(prompt, (str, dict)):
        prompts = [prompt]
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(p, (str, list, dict)) for p in prompt)
    ):
        prompts = prompt
    else:
        prompts = [prompt]
    if not prompts:
        raise APIError(400, "the prompt is empty")
    out = []
    for p in prompts:
        tokens = _tokenize_one(model, p)
        if not tokens:
            raise APIError(400, "the prompt is empty")
        out.append(tokens)
    return out


def _logit_bias(model: _core.Model, bias: Any) -> dict[int, float]:
    """Token ids or token strings (every token of the string) to a bias; false = -inf."""
    out: dict[int, float] = {}
    items = bias.items() if isinstance(bias, dict) else bias
    for item in items:
        if isinstance(bias, dict):
            key, value = item
        else:
            if not isinstance(item, list) or len(item) != 2:
                raise APIError(400, "logit_bias entries must be [token, bias] pairs")
            key, value = item
        value = -float("inf") if value is False else value
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise APIError(400, f"logit_bias value for {key!r} must be a number or false")
        if isinstance(key, int) or (isinstance(key, str) and key.lstrip("-").isdigit()):
            tok = int(key)
            if not 0 <= tok < model.n_vocab:
                raise APIError(400, f"logit_bias token {tok} is out of range")
            out[tok] = float(value)
        elif isinstance(key, str):
            for tok in model.tokenize(key, False, False):
                out[tok] = float(value)
        else:
            raise APIError(400, "logit_bias keys are token ids or strings")
    return out


def stops(stop: Any) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else [s for s in stop if s]


@dataclass
class Options:
    """Generation options common to all endpoints, after translation."""

    n_predict: int = -1
    n_cmpl: int = 1
    n_probs: int = 0
    grammar: str | None = None
    trigger_patterns: list[str] = field(default_factory=list)  # non-empty: the grammar is lazy
    preserved: list[int] = field(default_factory=list)  # special tokens written out as text
    stop: list[str] = field(default_factory=list)
    sampling: _core.SamplingParams | None = None  # set by make_tasks: what the tasks sample with


def make_tasks(
    state: ServerState, prompts: Sequence[list[int]], req: Sampling, opts: Options
) -> list[_core.TaskParams]:
    model, _ = state.require()
    s = state.settings
    kw: dict[str, Any] = {name: getattr(req, name) for name in SAMPLING_FIELDS}
    temp = req.temperature if req.temperature is not None else req.temp
    kw["temperature"] = s.temperature if temp is None else temp
    seed = req.seed if req.seed is not None else s.seed
    kw["seed"] = _core.DEFAULT_SEED if seed is None or seed < 0 else seed
    try:
        sampling = make_sampling_params(
            grammar=opts.grammar if opts.grammar is not None else req.grammar,
            json_schema=req.json_schema if opts.grammar is None else None,
            logit_bias=_logit_bias(model, req.logit_bias) if req.logit_bias else None,
            **kw,
        )
    except (ValueError, TypeError) as e:
        raise APIError(400, str(e)) from e
    if opts.trigger_patterns:
        sampling.grammar_lazy = True
        sampling.grammar_trigger_patterns = opts.trigger_patterns
    opts.sampling = sampling
    n_predict = opts.n_predict
    if n_predict < 0 and s.n_predict >= 0:
        n_predict = s.n_predict
    lora = _lora_scales(state, req.lora)
    tasks = []
    for tokens in prompts:
        t = _core.TaskParams()
        t.prompt = tokens
        t.sampling = sampling
        t.n_predict = n_predict
        t.stop = opts.stop
        t.preserved_tokens = opts.preserved
        t.return_progress = req.return_progress and req.stream
        t.n_probs = opts.n_probs
        t.post_sampling_probs = req.post_sampling_probs
        t.cache_prompt = req.cache_prompt
        t.n_cmpl = opts.n_cmpl
        t.id_slot = req.id_slot
        if req.t_max_predict_ms:
            t.t_max_predict_ms = req.t_max_predict_ms
        t.n_cache_reuse = req.n_cache_reuse if req.n_cache_reuse is not None else s.cache_reuse
        if req.spec_n_max is not None:
            t.spec_n_max = req.spec_n_max
        if req.spec_n_min is not None:
            t.spec_n_min = req.spec_n_min
        if req.spec_p_min is not None:
            t.spec_p_min = req.spec_p_min
        if lora is not None:
            t.lora_scales = lora
        tasks.append(t)
    return tasks


def _lora_scales(state: ServerState, lora: list[dict[str, Any]] | None) -> list[float] | None:
    if lora is None:
        return None
    _, engine = state.require()
    n = len(engine.engine.lora_paths)
    scales = [0.0] * n
    for item in lora:
        i, scale = item.get("id"), item.get("scale", 1.0)
        if not isinstance(i, int) or not 0 <= i < n:
            raise APIError(400, f"lora id {i!r} is not a loaded adapter (0..{n - 1})")
        if not isinstance(scale, (int, float)):
            raise APIError(400, "lora scale must be a number")
        scales[i] = float(scale)
    return scales


def submit(state: ServerState, tasks: list[_core.TaskParams]) -> list[TaskStream]:
    """Submit before any response byte: refusals become errors the client can read."""
    _, engine = state.require()
    try:
        return engine.submit_many(tasks)
    except _core.ContextSizeError as e:
        raise APIError(
            400,
            "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error",
            n_prompt_tokens=int(e.n_prompt_tokens),
            n_ctx=int(e.n_ctx),
        ) from e
    except _core.OverloadedError as e:
        raise APIError(503, str(e)) from e
    except ValueError as e:
        raise APIError(400, str(e)) from e


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
        if ev.type == "error":
            raise APIError(500, f"{ev.error_kind}: {ev.message}")
        if ev.type != "progress" or progress:
            yield ev


async def _until_disconnect(receive: Any) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


async def collect(streams: list[TaskStream], n_cmpl: int, receive: Any = None) -> list[Result]:
    """Fold every stream; a client that disconnects meanwhile cancels them all."""

    async def fold(stream: TaskStream) -> list[Result]:
        results = [Result(i) for i in range(n_cmpl)]
        async for ev in events(stream):
            r = results[ev.index]
            if ev.type == "token":
                r.text.append(ev.text)
                if ev.token >= 0:
                    r.tokens.append(ev.token)
                    r.probs.append(ev)
            else:
                r.final = ev
        return results

    work = asyncio.ensure_future(asyncio.gather(*[fold(s) for s in streams]))
    watch = asyncio.ensure_future(_until_disconnect(receive)) if receive else None
    try:
        if watch is None:
            groups = await work
        else:
            done, _ = await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
            if work not in done:
                raise asyncio.CancelledError("client disconnected")
            groups = work.result()
    except EngineError as e:
        raise APIError(500, str(e)) from e
    finally:
        if watch is not None:
            watch.cancel()
        if not work.done():
            work.cancel()
        for s in streams:
            s.close()
    return [r for g in groups for r in g]


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
