"""OpenAI-compatible endpoints: /v1/models, /v1/completions, /v1/chat/completions,
/v1/embeddings (and llama-server's /embedding)."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import json_body, json_response, parse, sse
from pyllama.server.media import prompt as media_prompt
from pyllama.server.pipeline import results, tasks
from pyllama.server.pipeline.embeddings import embed, pooled, pooling_none
from pyllama.server.pipeline.plan import ChatReader
from pyllama.server.pipeline.turn import ChatCall, ChatTurn, finish_reason, plan_call, start_chat
from pyllama.server.protocols.native.routes import native_final
from pyllama.server.protocols.openai import transcriptions
from pyllama.server.protocols.openai.schemas import (
    ChatRequest,
    EmbeddingRequest,
    OAICompletionRequest,
)
from pyllama.server.state import ServerState
from pyllama.server.streams import sse_reply

__all__ = ["ROUTES"]


def _state(request: Request) -> ServerState:
    return request.app.state.pyllama


def _envelope(state: ServerState, kind: str, prefix: str) -> dict[str, Any]:
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": state.model_name,
        "system_fingerprint": _core.build_info(),  # llama-server's "b<N>-<commit>"
    }


def _logprobs_content(state: ServerState, r: results.Result, post: bool) -> dict[str, Any]:
    return {"content": [results.token_probs(state, ev, post) for ev in r.probs]}


def _error_done(e: APIError) -> bytes:
    """An error after the first byte: the envelope as an event, then the usual end, so
    an OpenAI client stops reading instead of waiting."""
    return sse(e.body()) + b"data: [DONE]\n\n"


async def models(request: Request) -> Response:
    state = _state(request)
    state.check()  # answered while asleep
    info = state.model_info()
    entry = {
        "id": state.model_name,
        "aliases": state.model_aliases,
        "tags": state.settings.tags,
        "object": "model",
        "created": state.started,
        "owned_by": "llamacpp",
        "meta": info,
    }
    return json_response(
        {
            "models": [
                {
                    "name": state.model_name,
                    "model": state.model_name,
                    "type": "model",
                    "capabilities": ["completion", "multimodal"]
                    if state.modalities["vision"] or state.modalities["audio"]
                    else ["completion"],
                    "details": {"format": "gguf"},
                }
            ],
            "object": "list",
            # the base model first, then each LoRA adapter as a model of its own, as vLLM
            # lists its --lora-modules (a request naming one runs with it)
            "data": [entry, *(_adapter_entry(state, p) for p, _ in state.settings.lora)],
        }
    )


def _adapter_entry(state: ServerState, path: str) -> dict[str, Any]:
    return {
        "id": Path(path).stem,
        "object": "model",
        "created": state.started,
        "owned_by": "llamacpp",
        "root": path,
        "parent": state.model_name,
    }


def _n_predict(*values: int | None) -> int:
    for v in values:
        if v is not None:
            return v
    return -1


async def completions(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, OAICompletionRequest)
    model, _ = state.require()
    if req.echo:
        raise APIError(400, "'echo' is not supported")
    if req.suffix is not None:
        raise APIError(400, "'suffix' is not supported; use /infill")
    prompt = await media_prompt.resolve_prompts(state.projector, req.prompt)
    prompts = tasks.tokenize_prompts(model, prompt)
    opts = tasks.Options(
        n_predict=_n_predict(req.max_tokens, req.n_predict),
        n_cmpl=req.n,
        n_probs=req.logprobs or req.n_probs or 0,
        stop=tasks.stops(req.stop),
    )
    streams = tasks.submit(state, tasks.make_tasks(state, prompts, req, opts))
    env = _envelope(state, "text_completion", "cmpl")
    n_prompt = sum(len(p) for p in prompts)
    if req.stream:
        return sse_reply(
            request,
            _stream_completions(state, streams, req, env, n_prompt),
            _error_done,
            ping_s=req.ping_s(state.settings.sse_ping_interval),
        )
    done = await results.collect(streams, req.n, request.receive)
    finals = [r.final for r in done if r.final is not None]
    choices = []
    for i, r in enumerate(done):
        assert r.final is not None
        choices.append(
            {
                "text": r.content,
                "index": i,
                "logprobs": _logprobs_content(state, r, req.post_sampling_probs)
                if opts.n_probs
                else None,
                "finish_reason": results.finish_reason(r.final),
            }
        )
    out = {**env, "choices": choices, "usage": results.usage(finals, n_prompt)}
    if len(finals) == 1:
        out["timings"] = results.timings(finals[0])
    return json_response(out)


async def _stream_completions(
    state: ServerState,
    streams: list[Any],
    req: OAICompletionRequest,
    env: dict[str, Any],
    n_prompt: int,
) -> AsyncIterator[bytes]:
    env = {**env}
    finals = []
    async for i, ev in results.merged(streams, progress=req.return_progress):
        index = i * req.n + ev.index
        if ev.type == "progress":  # llama-server's: an empty choice with prompt_progress
            empty = {"text": "", "index": index, "logprobs": None, "finish_reason": None}
            progress = {**env, "choices": [empty]}
            if req.timings_per_token:
                progress["timings"] = results.timings(ev)
            progress["prompt_progress"] = results.prompt_progress(ev)
            yield sse(progress)
        elif ev.type == "token":
            if not ev.text and not req.logprobs:
                continue
            choice: dict[str, Any] = {
                "text": ev.text.decode("utf-8", errors="replace"),
                "index": index,
                "logprobs": None,
                "finish_reason": None,
            }
            if req.logprobs and ev.token >= 0:
                choice["logprobs"] = {
                    "content": [results.token_probs(state, ev, req.post_sampling_probs)]
                }
            out = {**env, "choices": [choice]}
            if req.timings_per_token:
                out["timings"] = results.timings(ev)
            yield sse(out)
        else:
            finals.append(ev)
            chunk = {
                **env,
                "choices": [
                    {
                        "text": "",
                        "index": index,
                        "logprobs": None,
                        "finish_reason": results.finish_reason(ev),
                    }
                ],
            }
            if len(streams) == 1 and req.n == 1:
                chunk["timings"] = results.timings(ev)
            yield sse(chunk)
    if req.stream_options and req.stream_options.include_usage:
        yield sse({**env, "choices": [], "usage": results.usage(finals, n_prompt)})
    yield b"data: [DONE]\n\n"


def _chat_call(req: ChatRequest) -> ChatCall:
    """The chat call of an OpenAI chat request (also sized by /chat/completions/input_tokens)."""
    n_probs = (req.top_logprobs or 0) if req.logprobs else 0
    if req.logprobs and not n_probs:
        n_probs = 1  # the chosen token's own logprob needs at least one candidate
    return ChatCall(
        messages=req.messages,
        sampling=req,
        n_predict=_n_predict(req.max_completion_tokens, req.max_tokens, req.n_predict),
        stop=tasks.stops(req.stop),
        tools=req.tools,
        tool_choice=req.tool_choice,
        parallel_tool_calls=req.parallel_tool_calls,
        response_format=req.response_format,
        reasoning_format=req.reasoning_format,
        template_kwargs=req.chat_template_kwargs,
        add_generation_prompt=req.add_generation_prompt,
        continue_final=req.continue_final_message,
        n=req.n,
        n_probs=n_probs,
    )


async def chat_control(request: Request) -> Response:
    """Act on a running chat completion by its id: ``reasoning_end`` ends its thinking
    block now (the request must have asked for ``reasoning_control``)."""
    state = _state(request)
    body = await json_body(request)
    cmpl_id, action = body.get("id"), body.get("action")
    if not isinstance(cmpl_id, str) or not cmpl_id:
        raise APIError(400, "missing completion id")
    if action != "reasoning_end":
        raise APIError(400, "unknown control action")
    _, engine = state.require()
    ok, why = await engine.control(cmpl_id, action)
    return json_response({"success": ok, "message": why} if why else {"success": ok})


async def chat_completions(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, ChatRequest)
    state.require()
    env = _envelope(state, "chat.completion", "chatcmpl")
    call = _chat_call(req)
    call.cmpl_id = env["id"]
    turn = await start_chat(state, call)
    if req.stream:
        env["object"] = "chat.completion.chunk"
        return sse_reply(
            request,
            _stream_chat(state, turn, req, env),
            _error_done,
            ping_s=req.ping_s(state.settings.sse_ping_interval),
        )
    done = await results.collect(turn.streams, req.n, request.receive)
    finals = [r.final for r in done if r.final is not None]
    choices = []
    for r in done:
        assert r.final is not None
        message, calls = turn.plan.message(r.content)
        choice: dict[str, Any] = {
            "finish_reason": finish_reason(r.final, bool(calls)),
            "index": r.index,
            "message": message,
        }
        if req.logprobs:
            choice["logprobs"] = _chat_logprobs(state, r.probs, req.top_logprobs or 0)
        choices.append(choice)
    out = {**env, "choices": choices, "usage": results.usage(finals, turn.n_prompt)}
    if len(finals) == 1:
        out["timings"] = results.timings(finals[0])
    if req.verbose if req.verbose is not None else state.settings.verbose:
        out["__verbose"] = native_final(
            state,
            done[0],
            turn.n_prompt,
            req,
            False,
            tasks.prompt_text(state.require()[0], turn.plan.tokens),
            turn.sampling,
        )
    return json_response(out)


async def chat_input_tokens(request: Request) -> Response:
    """The prompt size a chat request would have (llama-server's
    /chat/completions/input_tokens)."""
    state = _state(request)
    req = await parse(request, ChatRequest)
    state.require()
    return json_response({"input_tokens": len((await plan_call(state, _chat_call(req))).tokens)})


def _chat_logprobs(state: ServerState, events: list[_core.Event], top_n: int) -> dict[str, Any]:
    content = []
    for ev in events:
        p = results.token_probs(state, ev, False)
        p["top_logprobs"] = p["top_logprobs"][:top_n]
        content.append(p)
    return {"content": content}


async def _stream_chat(
    state: ServerState, turn: ChatTurn, req: ChatRequest, env: dict[str, Any]
) -> AsyncIterator[bytes]:
    # its own loop rather than ChatTurn.stream: a token's logprobs travel with its delta
    readers: dict[int, ChatReader] = {}
    finals = []

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **env,
            "choices": [
                {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
            ],
        }

    async for _, ev in results.merged(turn.streams, progress=req.return_progress):
        if ev.type == "progress":
            c = chunk(ev.index, {"role": "assistant", "content": None})
            if req.timings_per_token:  # as llama-server: timings only when asked for
                c["timings"] = results.timings(ev)
            c["prompt_progress"] = results.prompt_progress(ev)
            yield sse(c)
            continue
        reader = readers.get(ev.index)
        if reader is None:
            reader = readers[ev.index] = turn.plan.deltas()
            yield sse(chunk(ev.index, {"role": "assistant", "content": None}))
        if ev.type == "token":
            deltas = reader.feed(ev.text.decode("utf-8", errors="replace")) if ev.text else []
            want_probs = req.logprobs and ev.token >= 0
            if want_probs and not deltas:
                deltas = [{"content": ""}]
            for i, delta in enumerate(deltas):
                c = chunk(ev.index, delta)
                if want_probs and i == 0:
                    c["choices"][0]["logprobs"] = _chat_logprobs(state, [ev], req.top_logprobs or 0)
                if req.timings_per_token and i == len(deltas) - 1:
                    c["timings"] = results.timings(ev)
                yield sse(c)
        else:
            finals.append(ev)
            for delta in reader.finish():
                yield sse(chunk(ev.index, delta))
            last = chunk(ev.index, {}, finish_reason(ev, reader.n_calls > 0))
            if req.n == 1:
                last["timings"] = results.timings(ev)
            yield sse(last)
    if req.stream_options and req.stream_options.include_usage:
        usage = {**env, "choices": [], "usage": results.usage(finals, turn.n_prompt)}
        if len(finals) == 1:
            usage["timings"] = results.timings(finals[0])
        yield sse(usage)
    yield b"data: [DONE]\n\n"


async def embeddings_oai(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, EmbeddingRequest)
    if pooling_none(state):
        raise APIError(
            400, "Pooling type 'none' is not OAI compatible. Please use a different pooling type"
        )
    rows, sizes = await embed(
        state, request, req.input if req.input is not None else req.content, req.embd_normalize
    )
    vectors = pooled(state, rows, "/v1/embeddings")
    data = []
    for i, v in enumerate(vectors):
        emb: Any = v
        if req.encoding_format == "base64":
            emb = base64.b64encode(np.asarray(v, dtype=np.float32).tobytes()).decode()
        data.append({"object": "embedding", "index": i, "embedding": emb})
    n = sum(sizes)
    return json_response(
        {
            "object": "list",
            "model": state.model_name,
            "data": data,
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }
    )


async def embeddings_native(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, EmbeddingRequest)
    rows, _ = await embed(
        state, request, req.content if req.content is not None else req.input, req.embd_normalize
    )
    return json_response([{"index": i, "embedding": r} for i, r in enumerate(rows)])


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/models", models, ["GET"]),
    ("/v1/models", models, ["GET"]),
    ("/v1/completions", completions, ["POST"]),
    ("/chat/completions", chat_completions, ["POST"]),
    ("/chat/completions/input_tokens", chat_input_tokens, ["POST"]),
    ("/v1/chat/completions/input_tokens", chat_input_tokens, ["POST"]),
    ("/v1/chat/completions", chat_completions, ["POST"]),
    ("/v1/chat/completions/control", chat_control, ["POST"]),
    ("/embedding", embeddings_native, ["POST"]),
    ("/embeddings", embeddings_native, ["POST"]),
    ("/v1/embeddings", embeddings_oai, ["POST"]),
    *transcriptions.ROUTES,
]
