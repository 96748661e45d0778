"""Ollama's request fields to a ``ChatCall``'s, and replies (OpenAI-style messages and
deltas, engine final events) back to Ollama's fields."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import orjson
from starlette.requests import Request

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.media.content import image_part
from pyllama.server.pipeline import results, tasks
from pyllama.server.pipeline.schemas import Sampling
from pyllama.server.pipeline.turn import sampling_from
from pyllama.server.protocols.ollama.schemas import Message, Options
from pyllama.server.state import ServerState

log = logging.getLogger("pyllama.server")

__all__ = ["Clock", "done", "fields", "message_in", "now", "options", "response_format", "think"]

_SAMPLING = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "seed",
    "repeat_penalty",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ------------------------------------------------------------------------------ in
_warned: set[tuple[int, int]] = set()


def _clamped(num_ctx: int, n_ctx_slot: int) -> None:
    """``num_ctx`` above what the server can give: Ollama itself clamps a num_ctx above the
    model's trained context to it and warns ("requested context size too large for
    model"); a llama-server slot's context is fixed at start, so the request runs in the
    slot's and a prompt that does not fit is still refused (exceed_context_size_error).
    LlamaIndex's client sends the trained context as num_ctx with every request."""
    if (num_ctx, n_ctx_slot) not in _warned:  # once per value, not per request
        if len(_warned) >= 64:
            _warned.clear()
        _warned.add((num_ctx, n_ctx_slot))
        log.warning(
            "requested context size too large for a slot: num_ctx=%d, the slot's context "
            "n_ctx_slot=%d (--ctx-size / --parallel) is used",
            num_ctx,
            n_ctx_slot,
        )


def options(state: ServerState, opts: Options | None) -> tuple[Sampling, int, list[str]]:
    """(sampling, n_predict, stop) from Ollama's ``options``."""
    state.require()
    opts = opts or Options()
    if opts.num_ctx is not None and opts.num_ctx > state.n_ctx_slot:
        _clamped(opts.num_ctx, state.n_ctx_slot)
    fields = {k: getattr(opts, k) for k in _SAMPLING}
    if fields["repeat_last_n"] == -1:  # Ollama's "the whole context" (llama-server has no -1)
        fields["repeat_last_n"] = state.n_ctx_slot
    sampling = sampling_from(fields)
    n_predict = -1 if opts.num_predict is None or opts.num_predict == -2 else opts.num_predict
    return sampling, n_predict, tasks.stops(opts.stop)


def response_format(fmt: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Ollama's ``format`` as an OpenAI response_format."""
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, Mapping):
        return {"type": "json_schema", "json_schema": {"schema": dict(fmt)}}
    raise APIError(400, f"invalid format '{fmt}': use \"json\" or a JSON schema object")


def think(state: ServerState, value: bool | str | None) -> dict[str, Any] | None:
    """``think`` as chat template variables."""
    if value is None:
        return None
    assert state.chat is not None
    if value is not False and not state.chat.supports_thinking:
        raise APIError(400, f"'{state.model_name}' does not support thinking")
    if isinstance(value, str):  # a level, read by gpt-oss style templates
        return {"enable_thinking": True, "reasoning_effort": value}
    return {"enable_thinking": value}


def with_images(text: str, images: list[Any] | None, i: int = 0) -> Any:
    """Ollama's ``images`` (base64 strings) as OpenAI image parts before the text, where a
    vision prompt puts them; just the text without images."""
    if not images:
        return text
    if not all(isinstance(img, str) for img in images):
        raise APIError(400, f"messages[{i}].images must be base64 strings")
    return [*(image_part(img) for img in images), {"type": "text", "text": text}]


ROLES = ("system", "user", "assistant", "tool")


def message_in(m: Message, i: int) -> dict[str, Any]:
    """One Ollama message as an OpenAI one; a role Ollama does not know is a 400."""
    if m.role not in ROLES:
        raise APIError(400, f"messages[{i}]: unknown role '{m.role}' (one of {', '.join(ROLES)})")
    out: dict[str, Any] = {"role": m.role, "content": with_images(m.content or "", m.images, i)}
    if m.thinking:
        out["reasoning_content"] = m.thinking
    if m.tool_calls:
        calls = []
        for tc in m.tool_calls:
            args = orjson.dumps(tc.function.arguments).decode()
            call: dict[str, Any] = {
                "type": "function",
                "function": {"name": tc.function.name, "arguments": args},
            }
            if tc.id:
                call["id"] = tc.id
            calls.append(call)
        out["tool_calls"] = calls
    if m.tool_name:
        out["name"] = out["tool_name"] = m.tool_name
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    return out


# ----------------------------------------------------------------------------- out
def _arguments(text: str) -> Any:
    # Ollama carries an object. Calls are grammar-constrained JSON; a format parsed without
    # a grammar may give text that is not, passed on as it came
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for c in calls:
        fn = {"name": c["function"]["name"], "arguments": _arguments(c["function"]["arguments"])}
        if "index" in c:
            fn["index"] = c["index"]
        call: dict[str, Any] = {"function": fn}
        if "id" in c:
            call["id"] = c["id"]
        out.append(call)
    return out


def fields(deltas: list[dict[str, Any]], text_key: str) -> dict[str, Any]:
    """OpenAI-style deltas (or a whole message) as Ollama fields: ``text_key`` (content or
    response), thinking, tool_calls."""
    out: dict[str, Any] = {text_key: ""}
    for d in deltas:
        if d.get("content"):
            out[text_key] += d["content"]
        if d.get("reasoning_content"):
            out["thinking"] = out.get("thinking", "") + d["reasoning_content"]
        if d.get("tool_calls"):
            out.setdefault("tool_calls", []).extend(_calls(d["tool_calls"]))
    return out


class Clock:
    """A request's durations as Ollama reports them: ``start`` (perf_counter_ns) is when
    the request arrived, ``load_ns`` how long it waited for the model to be loaded. As in
    Ollama (the time to get a loaded model, a load included), that is the reload after
    ``--sleep-idle-seconds`` when this request woke the server, and nothing when the model
    was already in memory: pyllama-server loads it once, before serving."""

    def __init__(self, request: Request) -> None:
        self.load_ns: int = request.scope.get("state", {}).get("load_wait_ns", 0)
        self.start = time.perf_counter_ns() - self.load_ns

    def total(self) -> int:
        return time.perf_counter_ns() - self.start


def done(final: _core.Event, clock: Clock) -> dict[str, Any]:
    """The last chunk's fields."""
    return {
        "done": True,
        "done_reason": results.finish_reason(final),
        "total_duration": clock.total(),
        "load_duration": clock.load_ns,
        "prompt_eval_count": final.n_prompt,
        "prompt_eval_duration": int(final.t_prompt_ms * 1e6),
        "eval_count": final.n_predicted,
        "eval_duration": int(final.t_predicted_ms * 1e6),
    }
