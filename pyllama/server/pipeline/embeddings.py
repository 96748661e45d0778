"""Embedding and rerank-scoring tasks for any protocol: inputs tokenized as llama-server
does, one task per input, the vectors (or scores) and each input's token count back."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.pipeline import results, tasks
from pyllama.server.state import ServerState

__all__ = ["embed"]


async def embed(
    state: ServerState,
    request: Request,
    inputs: Any,
    normalize: int | None,
    kind: _core.TaskKind = _core.TaskKind.EMBEDDING,
) -> tuple[list[list[float]], list[int]]:
    if not (state.settings.embeddings or state.settings.reranking):
        raise APIError(501, "This server does not support embeddings. Start it with `--embeddings`")
    model, _ = state.require()
    if inputs is None:
        raise APIError(400, "'input' or 'content' is required")
    prompts = tasks.tokenize_prompts(model, inputs)
    jobs = []
    for p in prompts:
        t = _core.TaskParams()
        t.kind = kind
        t.prompt = p
        t.embd_normalize = state.settings.embd_normalize if normalize is None else normalize
        jobs.append(t)
    streams = tasks.submit(state, jobs)
    done = await results.collect(streams, 1, request.receive)
    return [list(r.final.embedding) for r in done if r.final is not None], [len(p) for p in prompts]
