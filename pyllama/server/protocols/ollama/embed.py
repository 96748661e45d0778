"""Ollama's /api/embed (L2-normalized vectors) and the older /api/embeddings (one raw
vector), on the OpenAI module's embedding path."""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import json_response, parse
from pyllama.server.pipeline.embeddings import embed, pooled
from pyllama.server.protocols.ollama.convert import Clock, options
from pyllama.server.protocols.ollama.schemas import EmbeddingsRequest, EmbedRequest
from pyllama.server.state import ServerState

__all__ = ["ROUTES"]


def _tokens(state: ServerState, texts: list[str], truncate: bool) -> list[list[int]]:
    """Token ids per text, cut to a slot's context when ``truncate`` (keeping the closing
    SEP/EOS the tokenizer adds); too long otherwise is the engine's 400."""
    model, _ = state.require()
    limit = state.n_ctx_slot
    out = []
    for text in texts:
        tokens = model.tokenize(text, True, True)
        if truncate and len(tokens) > limit:
            tokens = tokens[: limit - 1] + tokens[-1:] if model.add_eos else tokens[:limit]
        out.append(tokens)
    return out


def _shorten(v: list[float], dims: int | None) -> list[float]:
    """Ollama's ``dimensions``: the first ``dims`` values, normalized again."""
    if dims is None:
        return v
    if dims > len(v):
        raise APIError(400, f"dimensions must be at most {len(v)} for this model")
    norm = math.sqrt(sum(x * x for x in v[:dims])) or 1.0
    return [x / norm for x in v[:dims]]


async def embed_route(request: Request) -> Response:
    clock = Clock(request)
    state: ServerState = request.app.state.pyllama
    req = await parse(request, EmbedRequest)
    options(state, req.options)
    texts = [req.input] if isinstance(req.input, str) else req.input
    if not texts or not all(texts):
        raise APIError(400, "'input' must be a non-empty string or a list of them")
    rows, sizes = await embed(state, request, _tokens(state, texts, req.truncate), 2)
    vectors = pooled(state, rows, "/api/embed")
    return json_response(
        {
            "model": req.model or state.model_name,
            "embeddings": [_shorten(v, req.dimensions) for v in vectors],
            "total_duration": clock.total(),
            "load_duration": clock.load_ns,
            "prompt_eval_count": sum(sizes),
        }
    )


async def embeddings(request: Request) -> Response:
    """One prompt; its vector is not normalized, as Ollama's older endpoint."""
    state: ServerState = request.app.state.pyllama
    req = await parse(request, EmbeddingsRequest)
    options(state, req.options)
    rows, _ = await embed(state, request, _tokens(state, [req.prompt], True), -1)
    return json_response({"embedding": pooled(state, rows, "/api/embeddings")[0]})


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/api/embed", embed_route, ["POST"]),
    ("/api/embeddings", embeddings, ["POST"]),
]
