"""Ollama's API. /api/chat and /api/generate here; embeddings in ``embed``, the
model endpoints (tags, show, ps, version) in ``models``, field translation in
``convert``. Replies stream as NDJSON, one object a line, unless ``stream`` is
false (Ollama streams by default). Every error under /api/ is ``{"error": "message"}``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Optional

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from pyllama import _core
from pyllama.engine import EngineError
from pyllama.sampling import grammar_for_response_format
from pyllama.server.http.errors import APIError, register_shape
from pyllama.server.http.wire import json_response, parse
from pyllama.server.pipeline import results, tasks
from pyllama.server.pipeline.turn import ChatCall, ChatTurn, start_chat
from pyllama.server.protocols.native.infill import infill_tokens
from pyllama.server.protocols.ollama import embed as ollama_embed
from pyllama.server.protocols.ollama import models as ollama_models
from pyllama.server.protocols.ollama.convert import (
    Clock,
    done,
    fields,
    message_in,
    now,
    options,
    response_format,
    think,
    with_images,
)
from pyllama.server.protocols.ollama.schemas import ChatRequest, GenerateRequest
from pyllama.server.state import ServerState

__all__ = ["ROUTES"]

register_shape(("/api/",), lambda status, message, type_, extra: {"error": message})

# a reply piece: (Ollama fields, the final event once the reply ends)
Piece = tuple[dict, Optional[_core.Event]]


def _state(request: Request) -> ServerState:
    return request.app.state.pyllama


def _refuse(req: ChatRequest | GenerateRequest) -> None:
    if req.logprobs:
        raise APIError(400, "'logprobs' is not supported")


def _ndjson(chunks: AsyncIterator[dict[str, Any]]) -> StreamingResponse:
    """One JSON object a line. Starlette cancels ``chunks`` when the client goes away,
    which cancels the engine task."""

    async def lines() -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield orjson.dumps(chunk) + b"\n"
        except (APIError, EngineError) as e:  # after the first byte: Ollama's error line
            yield orjson.dumps({"error": getattr(e, "message", str(e))}) + b"\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def _chunks(
    pieces: AsyncIterator[Piece], name: str, text_key: str, clock: Clock
) -> AsyncIterator[dict[str, Any]]:
    """Ollama's stream: chat chunks carry a message, generate chunks ``response`` at the
    top; the last chunk is done, with the counts."""

    def chunk(body: dict[str, Any]) -> dict[str, Any]:
        if text_key == "content":
            body = {"message": {"role": "assistant", **body}}
        return {"model": name, "created_at": now(), **body, "done": False}

    async for body, final in pieces:
        if len(body) > 1 or body[text_key]:
            yield chunk(body)
        if final is not None:
            yield {**chunk({text_key: ""}), **done(final, clock)}


async def _turn_pieces(turn: ChatTurn, text_key: str) -> AsyncIterator[Piece]:
    async for _, deltas, final in turn.stream():
        yield fields(deltas, text_key), final


async def _raw_pieces(streams: list[Any]) -> AsyncIterator[Piece]:
    async for _, ev in results.merged(streams):
        if ev.type == "token":
            yield {"response": ev.text.decode("utf-8", errors="replace")}, None
        else:
            yield {"response": ""}, ev


async def chat(request: Request) -> Response:
    clock = Clock(request)
    state = _state(request)
    req = await parse(request, ChatRequest)
    state.require()
    _refuse(req)
    sampling, n_predict, stop = options(state, req.options)
    turn = await start_chat(
        state,
        ChatCall(
            messages=[message_in(m, i) for i, m in enumerate(req.messages)],
            sampling=sampling,
            n_predict=n_predict,
            stop=stop,
            tools=req.tools,
            response_format=response_format(req.format),
            template_kwargs=think(state, req.think),
        ),
    )
    name = req.model or state.model_name
    if req.stream:
        return _ndjson(_chunks(_turn_pieces(turn, "content"), name, "content", clock))
    reply = (await turn.replies(request.receive))[0]
    message = {"role": "assistant", **fields([reply.message], "content")}
    return json_response(
        {"model": name, "created_at": now(), "message": message, **done(reply.final, clock)}
    )


def _prompt_tokens(state: ServerState, req: GenerateRequest) -> list[int] | None:
    """Prompt tokens of an insert (suffix) or raw request; None: render a chat of system
    and user through the template, as Ollama does."""
    model, engine = state.require()
    if req.suffix:
        if min(model.token_fim_pre, model.token_fim_suf, model.token_fim_mid) < 0:
            raise APIError(400, f"'{state.model_name}' does not support insert")
        s = state.settings
        return infill_tokens(
            model,
            req.prompt,
            req.suffix,
            [],
            [],
            n_batch=s.n_batch,
            n_predict=s.n_predict,
            n_ctx=engine.engine.n_ctx_slot,
            spm=s.spm_infill,
        )
    if req.raw:
        if req.system:
            raise APIError(400, "raw mode does not support template, system, or context")
        return tasks.tokenize_prompts(model, req.prompt)[0]
    return None


async def generate(request: Request) -> Response:
    clock = Clock(request)
    state = _state(request)
    req = await parse(request, GenerateRequest)
    state.require()
    _refuse(req)
    if req.images and (req.raw or req.suffix):
        raise APIError(400, "images need the chat template: not with 'raw' or 'suffix'")
    if req.template:
        raise APIError(400, "'template' is not supported: the model's chat template is used")
    sampling, n_predict, stop = options(state, req.options)
    rf = response_format(req.format)
    name = req.model or state.model_name
    tokens = _prompt_tokens(state, req)
    if tokens is None:
        messages = [{"role": "user", "content": with_images(req.prompt, req.images)}]
        if req.system:
            messages.insert(0, {"role": "system", "content": req.system})
        call = ChatCall(
            messages=messages,
            sampling=sampling,
            n_predict=n_predict,
            stop=stop,
            response_format=rf,
            template_kwargs=think(state, req.think),
        )
        turn = await start_chat(state, call)
        if req.stream:
            return _ndjson(_chunks(_turn_pieces(turn, "response"), name, "response", clock))
        reply = (await turn.replies(request.receive))[0]
        body, final = fields([reply.message], "response"), reply.final
    else:
        try:
            grammar = grammar_for_response_format(rf)
        except ValueError as e:
            raise APIError(400, str(e)) from e
        opts = tasks.Options(n_predict=n_predict, grammar=grammar, stop=stop)
        streams = tasks.submit(state, tasks.make_tasks(state, [tokens], sampling, opts))
        if req.stream:
            return _ndjson(_chunks(_raw_pieces(streams), name, "response", clock))
        result = (await results.collect(streams, 1, request.receive))[0]
        assert result.final is not None
        body, final = {"response": result.content}, result.final
    return json_response({"model": name, "created_at": now(), **body, **done(final, clock)})


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/api/chat", chat, ["POST"]),
    ("/api/generate", generate, ["POST"]),
    *ollama_embed.ROUTES,
    *ollama_models.ROUTES,
]
