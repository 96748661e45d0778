"""OpenAI Responses API: POST /v1/responses (and llama-server's /responses), GET and
DELETE /v1/responses/{id}.

A translation onto ``pipeline.turn``: input items become chat messages, the reply becomes output
items (reasoning, message, function_call), whole or streamed as Responses events. Ids and
shapes follow llama-server (``resp_``, ``msg_``, ``rs_``, ``fc_`` + call id, ``call_`` +
call id); unlike llama-server, responses are stored for ``previous_response_id``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import json_response, parse, sse
from pyllama.server.pipeline import results, tasks
from pyllama.server.pipeline.schemas import MAX_TOKENS, Sampling
from pyllama.server.pipeline.turn import ChatCall, ChatTurn, plan_call, start_chat
from pyllama.server.protocols.responses.convert import (
    ReasoningConfig,
    TextConfig,
    bad,
    input_items,
    text_format,
    to_chat_tools,
    to_messages,
    tool_choice,
)
from pyllama.server.protocols.responses.store import ResponseStore, StoredResponse
from pyllama.server.state import ServerState
from pyllama.server.streams import sse_reply

__all__ = ["ROUTES", "ResponsesRequest"]

_TOP_P = round(_core.SamplingParams().top_p, 6)  # llama.cpp's default, echoed when unset


Items = Annotated[list[Any], Field(max_length=100_000)]
MetaKey = Annotated[str, Field(max_length=64)]
MetaValue = Annotated[str, Field(max_length=512)]


class ResponsesRequest(Sampling):
    """The Responses fields; llama-server's sampling fields (top_k, seed, ...) pass through
    as on its chat route."""

    input: str | Items
    model: str | None = None
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    tools: list[Any] | None = Field(None, max_length=4096)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    store: bool = True
    previous_response_id: str | None = Field(None, max_length=256)
    metadata: dict[MetaKey, MetaValue] | None = Field(None, max_length=16)
    user: str | None = Field(None, max_length=512)
    background: bool | None = None
    conversation: Any = None
    prompt: Any = None
    reasoning_format: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None


# ----------------------------------------------------------------------- response
def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _reasoning_item(iid: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}] if text else []
    # encrypted_content as llama-server's (it keeps no encrypted reasoning: always empty)
    return {
        "id": iid,
        "type": "reasoning",
        "summary": [],
        "content": content,
        "encrypted_content": "",
        "status": status,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message_item(iid: str, text: str | None, status: str) -> dict[str, Any]:
    content = [_text_part(text)] if text is not None else []
    return {"id": iid, "type": "message", "status": status, "role": "assistant", "content": content}


def _call_item(call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": status,
        "call_id": f"call_{call_id}",
        "name": name,
        "arguments": arguments,
    }


def _usage(
    state: ServerState, turn: ChatTurn, final: _core.Event, reasoning: str
) -> dict[str, Any]:
    out = final.n_predicted
    n_reason = 0
    if reasoning and state.model is not None:  # re-tokenized: the engine does not split counts
        n_reason = min(out, len(state.model.tokenize(reasoning, False, False)))
    return {
        "input_tokens": turn.n_prompt,
        "input_tokens_details": {"cached_tokens": final.n_cached, "cache_write_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": n_reason},
        "total_tokens": turn.n_prompt + out,
    }


class _Translated:
    """A request after translation: what to run and what the response object echoes."""

    def __init__(self, state: ServerState, req: ResponsesRequest, store: ResponseStore) -> None:
        if req.background:
            raise bad("'background' is not supported")
        if req.conversation is not None or req.prompt is not None:
            raise bad("'conversation' and 'prompt' are not supported")
        self.req = req
        self.input = input_items(req.input)
        history = store.conversation(req.previous_response_id) if req.previous_response_id else []
        plain = isinstance(req.input, str) and not history  # as llama-server reads it
        messages = to_messages(req.input if plain else history + self.input, req.instructions)
        if not messages:
            raise bad("'input' must not be empty")
        tools, tools_echo = to_chat_tools(req.tools)
        names = [t["function"]["name"] for t in tools or []]
        choice, choice_echo = tool_choice(req.tool_choice, names)
        response_format, text_echo = text_format(req.text)
        kwargs = dict(req.chat_template_kwargs or {})
        if req.reasoning is not None and req.reasoning.effort is not None:
            kwargs.setdefault("reasoning_effort", req.reasoning.effort)
        n_predict = req.max_output_tokens if req.max_output_tokens is not None else req.n_predict
        self.call = ChatCall(
            messages=messages,
            sampling=req,
            n_predict=n_predict if n_predict is not None else -1,
            stop=tasks.stops(req.stop),
            tools=tools,
            tool_choice=choice,
            parallel_tool_calls=req.parallel_tool_calls,
            response_format=response_format,
            reasoning_format=req.reasoning_format,
            template_kwargs=kwargs or None,
        )
        temp = req.temperature if req.temperature is not None else req.temp
        self.response: dict[str, Any] = {
            "id": _id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens,
            "model": state.model_name,
            "output": [],
            "parallel_tool_calls": bool(req.parallel_tool_calls),
            "previous_response_id": req.previous_response_id,
            "reasoning": {
                "effort": req.reasoning.effort if req.reasoning else None,
                "summary": req.reasoning.summary if req.reasoning else None,
            },
            "store": req.store,
            "temperature": temp if temp is not None else state.settings.temperature,
            "text": text_echo,
            "tool_choice": choice_echo,
            "tools": tools_echo,
            "top_p": req.top_p if req.top_p is not None else _TOP_P,
            "truncation": "disabled",
            "usage": None,
            "user": req.user,
            "metadata": req.metadata or {},
        }

    def finished(
        self,
        state: ServerState,
        turn: ChatTurn,
        output: list[dict[str, Any]],
        final: _core.Event,
    ) -> dict[str, Any]:
        reasoning = "".join(
            c["text"] for item in output if item["type"] == "reasoning" for c in item["content"]
        )
        incomplete = results.finish_reason(final) == "length"
        return {
            **self.response,
            "status": "incomplete" if incomplete else "completed",
            "completed_at": int(time.time()),
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "output": output,
            "usage": _usage(state, turn, final, reasoning),
        }


def _state(request: Request) -> ServerState:
    return request.app.state.pyllama


def _store(request: Request) -> ResponseStore:
    app_state = request.app.state
    store = getattr(app_state, "pyllama_responses", None)
    if store is None:
        store = app_state.pyllama_responses = ResponseStore()
    return store


async def create(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, ResponsesRequest)
    state.require()
    store = _store(request)
    tr = _Translated(state, req, store)
    tr.call.cmpl_id = tr.response["id"]
    turn = await start_chat(state, tr.call)
    if req.stream:
        return sse_reply(
            request,
            _stream(state, store, tr, turn),
            ping_s=req.ping_s(state.settings.sse_ping_interval),
        )
    reply = (await turn.replies(request.receive))[0]
    length = reply.finish == "length"
    output = []
    if reply.reasoning:
        output.append(_reasoning_item(_id("rs"), reply.reasoning, "completed"))
    if reply.content:
        status = "incomplete" if length else "completed"
        output.append(_message_item(_id("msg"), reply.content, status))
    output += [_call_item(c.id, c.name, c.arguments, "completed") for c in reply.calls]
    body = tr.finished(state, turn, output, reply.final)
    if req.store:
        store.put(StoredResponse(body, tr.input))
    return json_response({**body, "timings": results.timings(reply.final)})


async def input_tokens(request: Request) -> Response:
    """The prompt size a Responses request would have (llama-server's
    /v1/responses/input_tokens): its input, instructions, tools and previous response."""
    state = _state(request)
    req = await parse(request, ResponsesRequest)
    state.require()
    tr = _Translated(state, req, _store(request))
    n = len((await plan_call(state, tr.call)).tokens)
    return json_response({"object": "response.input_tokens", "input_tokens": n})


class _Events:
    """Responses stream events, numbered, with the output items they build."""

    def __init__(self) -> None:
        self.seq = 0
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None  # the reasoning or message item being written
        self.text: list[str] = []
        self.at: dict[str, Any] = {}  # item_id, output_index, content_index of the open item
        self.index = -1  # the OpenAI index of the call whose function_call item is open

    def event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return b"event: " + kind.encode() + b"\n" + sse(data)

    def _add(self, item: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
        """Append an output item: its 'added' event, and where its later events point."""
        self.output.append(item)
        at = len(self.output) - 1
        added = self.event("response.output_item.added", item=item, output_index=at)
        return added, {"item_id": item["id"], "output_index": at}

    def _done(self, item: dict[str, Any]) -> bytes:
        self.output[-1] = item
        return self.event("response.output_item.done", item=item, output_index=len(self.output) - 1)

    def write(self, kind: str, delta: str, extra: dict[str, Any] | None = None) -> list[bytes]:
        """Text for a reasoning or message item, opening the item if needed; ``extra``
        fields go on the delta event."""
        extra = extra or {}
        out = []
        if self.open is None or self.open["type"] != kind:
            out += self.close("completed")
            if kind == "reasoning":
                self.open = _reasoning_item(_id("rs"), "", "in_progress")
                part = {"type": "reasoning_text", "text": ""}
            else:
                self.open = _message_item(_id("msg"), None, "in_progress")
                part = _text_part("")
            added, at = self._add(self.open)
            self.at = {**at, "content_index": 0}
            out += [added, self.event("response.content_part.added", **self.at, part=part)]
        self.text.append(delta)
        if kind == "reasoning":
            out.append(self.event("response.reasoning_text.delta", **self.at, delta=delta, **extra))
        else:
            out.append(
                self.event(
                    "response.output_text.delta", **self.at, delta=delta, logprobs=[], **extra
                )
            )
        return out

    def close(self, status: str) -> list[bytes]:
        """Finish the open reasoning or message item, if any."""
        if self.open is None:
            return []
        if self.open["type"] == "function_call":
            return self._close_call()
        text = "".join(self.text)
        if self.open["type"] == "reasoning":
            item = _reasoning_item(self.open["id"], text, "completed")
            part = {"type": "reasoning_text", "text": text}
            out = [self.event("response.reasoning_text.done", **self.at, text=text)]
        else:
            item = _message_item(self.open["id"], text, status)
            part = _text_part(text)
            out = [self.event("response.output_text.done", **self.at, text=text, logprobs=[])]
        out.append(self.event("response.content_part.done", **self.at, part=part))
        out.append(self._done(item))
        self.open, self.text = None, []
        return out

    def call(self, delta: Mapping[str, Any]) -> list[bytes]:
        """A tool call's delta: its first (with the name) opens a function_call item,
        later ones add to its arguments, as llama.cpp's parser reads the call."""
        fn = delta.get("function") or {}
        out: list[bytes] = []
        if (
            self.open is None
            or self.open["type"] != "function_call"
            or delta["index"] != self.index
        ):
            out += self.close("completed")
            self.open = _call_item(delta.get("id") or "", fn.get("name") or "", "", "in_progress")
            self.index = delta["index"]
            added, self.at = self._add(self.open)
            out.append(added)
        if fn.get("arguments"):
            self.text.append(fn["arguments"])
            out.append(
                self.event(
                    "response.function_call_arguments.delta", **self.at, delta=fn["arguments"]
                )
            )
        return out

    def _close_call(self) -> list[bytes]:
        assert self.open is not None
        args = "".join(self.text)
        item = {**self.open, "arguments": args, "status": "completed"}
        done = self.event(
            "response.function_call_arguments.done", **self.at, arguments=args, name=item["name"]
        )
        self.open, self.text = None, []
        return [done, self._done(item)]


async def _stream(
    state: ServerState, store: ResponseStore, tr: _Translated, turn: ChatTurn
) -> AsyncIterator[bytes]:
    ev = _Events()
    yield ev.event("response.created", response=tr.response)
    yield ev.event("response.in_progress", response=tr.response)
    req = tr.req
    stream = turn.stream_events(progress=req.return_progress)
    try:
        async for _, deltas, final, source in stream:
            if source.type == "progress":  # llama-server's telemetry on in_progress events
                yield ev.event(
                    "response.in_progress",
                    response=tr.response,
                    prompt_progress=results.prompt_progress(source),
                    timings=results.timings(source),
                )
                continue
            extra = {"timings": results.timings(source)} if req.timings_per_token else {}
            for d in deltas:
                if "reasoning_content" in d:
                    chunks = ev.write("reasoning", d["reasoning_content"], extra)
                elif "content" in d:
                    chunks = ev.write("message", d["content"], extra)
                else:
                    chunks = [c for call in d["tool_calls"] for c in ev.call(call)]
                for c in chunks:
                    yield c
            if final is not None:
                length = results.finish_reason(final) == "length"
                for c in ev.close("incomplete" if length else "completed"):
                    yield c
                body = tr.finished(state, turn, ev.output, final)
                if tr.req.store:
                    store.put(StoredResponse(body, tr.input))
                # response.completed even when the status is "incomplete" (max_output_tokens):
                # llama-server sends it, and the openai SDK's get_final_response() needs it
                yield ev.event("response.completed", response=body, timings=results.timings(final))
                return
    except APIError as e:  # after the first byte: the failure travels as events
        yield ev.event("error", code=e.type, message=e.message, param=None)
        failed = {**tr.response, "status": "failed", "output": ev.output}
        failed["error"] = {"code": "server_error", "message": e.message}
        yield ev.event("response.failed", response=failed)
    finally:
        await stream.aclose()


async def retrieve(request: Request) -> Response:
    rid = request.path_params["response_id"]
    stored = _store(request).get(rid)
    if stored is None:
        raise APIError(404, f"Response with id '{rid}' not found.")
    return json_response(stored.response)


async def delete(request: Request) -> Response:
    rid = request.path_params["response_id"]
    if not _store(request).delete(rid):
        raise APIError(404, f"Response with id '{rid}' not found.")
    return json_response({"id": rid, "object": "response.deleted", "deleted": True})


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/v1/responses", create, ["POST"]),
    ("/responses", create, ["POST"]),
    ("/v1/responses/input_tokens", input_tokens, ["POST"]),
    ("/responses/input_tokens", input_tokens, ["POST"]),
    ("/v1/responses/{response_id}", retrieve, ["GET"]),
    ("/v1/responses/{response_id}", delete, ["DELETE"]),
    ("/responses/{response_id}", retrieve, ["GET"]),
    ("/responses/{response_id}", delete, ["DELETE"]),
]
