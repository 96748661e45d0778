"""Anthropic Messages API: ``/v1/messages`` (whole and streamed) and
``/v1/messages/count_tokens``, translated to one chat turn (``pipeline.turn``) and back.

Errors on these routes take Anthropic's shape: ``{"type": "error", "error": {"type",
"message"}}``."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError, register_shape
from pyllama.server.http.wire import json_response, parse
from pyllama.server.pipeline import tasks
from pyllama.server.pipeline.schemas import MAX_TOKENS
from pyllama.server.pipeline.turn import (
    ChatCall,
    ChatTurn,
    extensions,
    plan_call,
    sampling_from,
    start_chat,
)
from pyllama.server.protocols.anthropic.convert import (
    to_openai_messages,
    to_openai_tools,
    tool_choice,
)
from pyllama.server.state import ServerState
from pyllama.server.streams import sse_reply

__all__ = ["ROUTES"]

_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
}


def _error_body(status: int, message: str, type_: str, extra: dict[str, Any]) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


register_shape(("/v1/messages",), _error_body)


class _Base(BaseModel):
    model_config = ConfigDict(extra="allow")  # unknown fields ignored, as llama-server


class CountTokensRequest(_Base):
    model: str | None = None
    messages: list[dict[str, Any]] = Field(..., max_length=100_000)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = Field(None, max_length=1024)
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None  # format: structured output; effort ignored
    chat_template_kwargs: dict[str, Any] | None = None


class MessagesRequest(CountTokensRequest):
    max_tokens: int = Field(..., ge=1, le=MAX_TOKENS)
    stop_sequences: list[str] | None = Field(None, max_length=64)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    metadata: dict[str, Any] | None = None  # accepted; user_id is not used
    stream: bool = False


def _state(request: Request) -> ServerState:
    return request.app.state.pyllama


def _call(req: CountTokensRequest, sampling: Mapping[str, Any] | None = None) -> ChatCall:
    messages = to_openai_messages(req.system, req.messages)
    tools = to_openai_tools(req.tools)
    choice, parallel = tool_choice(req.tool_choice, bool(tools))
    kwargs = dict(req.chat_template_kwargs or {})
    if req.thinking is not None:
        kind = req.thinking.get("type")
        if kind not in ("enabled", "disabled", "adaptive", "between_tools"):
            raise APIError(
                400, "thinking.type must be 'enabled', 'disabled', 'adaptive' or 'between_tools'"
            )
        kwargs.setdefault("enable_thinking", kind != "disabled")
        if kind == "enabled":  # as llama-server: budget_tokens (default 10000) caps the block
            budget = req.thinking.get("budget_tokens", 10000)
            if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
                raise APIError(400, "thinking.budget_tokens must be a non-negative integer")
            sampling = {**(sampling or {}), "thinking_budget_tokens": budget}
    return ChatCall(
        messages=messages,
        sampling=sampling_from(sampling or {}),
        response_format=_output_format(req.output_config),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        template_kwargs=kwargs,
    )


def _output_format(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """output_config.format ({"type": "json_schema", "schema": ...}) as OpenAI's
    response_format."""
    fmt = (config or {}).get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        raise APIError(400, "output_config.format must be {'type': 'json_schema', 'schema': ...}")
    if not isinstance(fmt.get("schema"), Mapping):
        raise APIError(400, "output_config.format.schema must be an object")
    return {"type": "json_schema", "json_schema": {"schema": fmt["schema"]}}


def _stop(final: Any, called: bool, stops: list[str]) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) from the engine's final event."""
    if final.stop == "word" and final.stopping_word in stops:
        return "stop_sequence", final.stopping_word
    if final.stop in ("eos", "word"):
        return ("tool_use" if called else "end_turn"), None
    return "max_tokens", None


def _usage(final: Any) -> dict[str, int]:
    return {
        "input_tokens": final.n_prompt - final.n_cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": final.n_cached,
        "output_tokens": final.n_predicted,
    }


def _tool_use(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    try:
        args = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        args = {}
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def _message_id() -> str:
    return "msg_" + secrets.token_hex(12)


async def messages(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, MessagesRequest)
    state.require()
    own = {"temperature": req.temperature, "top_p": req.top_p, "top_k": req.top_k}
    own["model"] = req.model  # an adapter's name selects it (tasks.adapter_names)
    call = _call(req, {**extensions(req.model_extra), **own})
    call.n_predict = req.max_tokens
    call.stop = tasks.stops(req.stop_sequences)
    call.cmpl_id = _message_id()
    turn = await start_chat(state, call)
    head = {"id": call.cmpl_id, "type": "message", "role": "assistant", "model": state.model_name}
    if req.stream:
        return sse_reply(
            request,
            _stream(turn, head, call.stop),
            on_error=_error_event,
            ping_s=state.settings.sse_ping_interval,
        )
    (reply,) = await turn.replies(request.receive)
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        # local models have no signature to give; the field is required by the API
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": ""})
    if reply.content:
        content.append({"type": "text", "text": reply.content})
    content += [_tool_use(c.id, c.name, c.arguments) for c in reply.calls]
    reason, sequence = _stop(reply.final, bool(reply.calls), call.stop)
    return json_response(
        {
            **head,
            "content": content,
            "stop_reason": reason,
            "stop_sequence": sequence,
            "usage": _usage(reply.final),
        }
    )


def _event(data: dict[str, Any]) -> bytes:
    return b"event: " + data["type"].encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _error_event(e: APIError) -> bytes:
    return _event(_error_body(e.status, e.message, e.type, e.extra))


class _Blocks:
    """OpenAI-style deltas in, Anthropic content-block events out. Blocks are numbered
    in the order they open (thinking, text, tool_use ...); a block closes when one of
    another kind opens. A tool call streams as llama.cpp's parser reads it: its first
    delta names it (a tool_use block opens), later ones add to its arguments
    (input_json_delta)."""

    def __init__(self) -> None:
        self.index = -1
        self.open: str | None = None  # "thinking" | "text" | "tool_use" while one is open
        self.call = -1  # the OpenAI index of the call whose tool_use block is open

    def close(self) -> list[bytes]:
        if self.open is None:
            return []
        out = []
        if self.open == "thinking":  # the API ends a thinking block with its signature
            out.append(self._delta({"type": "signature_delta", "signature": ""}))
        out.append(_event({"type": "content_block_stop", "index": self.index}))
        self.open = None
        return out

    def _start(self, block: dict[str, Any]) -> list[bytes]:
        out = self.close()
        self.index += 1
        out.append(
            _event({"type": "content_block_start", "index": self.index, "content_block": block})
        )
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return _event({"type": "content_block_delta", "index": self.index, "delta": delta})

    def feed(self, delta: dict[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        if "reasoning_content" in delta:
            if self.open != "thinking":
                out += self._start({"type": "thinking", "thinking": "", "signature": ""})
                self.open = "thinking"
            out.append(
                self._delta({"type": "thinking_delta", "thinking": delta["reasoning_content"]})
            )
        if "content" in delta:
            if self.open != "text":
                out += self._start({"type": "text", "text": ""})
                self.open = "text"
            out.append(self._delta({"type": "text_delta", "text": delta["content"]}))
        for c in delta.get("tool_calls", []):
            fn = c.get("function") or {}
            if self.open != "tool_use" or c["index"] != self.call:
                out += self._start(_tool_use(c.get("id") or "", fn.get("name") or "", "{}"))
                self.open, self.call = "tool_use", c["index"]
            if fn.get("arguments"):
                out.append(
                    self._delta({"type": "input_json_delta", "partial_json": fn["arguments"]})
                )
        return out


async def _stream(turn: ChatTurn, head: dict[str, Any], stops: list[str]) -> AsyncIterator[bytes]:
    start = {
        **head,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": turn.n_prompt,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 0,
        },
    }
    yield _event({"type": "message_start", "message": start})
    yield _event({"type": "ping"})
    blocks = _Blocks()
    called = False
    async for _, deltas, final in turn.stream():
        for d in deltas:
            called |= "tool_calls" in d
            for chunk in blocks.feed(d):
                yield chunk
        if final is not None:
            for chunk in blocks.close():
                yield chunk
            reason, sequence = _stop(final, called, stops)
            yield _event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": sequence},
                    "usage": _usage(final),
                }
            )
    yield _event({"type": "message_stop"})


async def count_tokens(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, CountTokensRequest)
    state.require()
    plan = await plan_call(state, _call(req))
    return json_response({"input_tokens": len(plan.tokens)})


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/v1/messages", messages, ["POST"]),
    ("/v1/messages/count_tokens", count_tokens, ["POST"]),
]
