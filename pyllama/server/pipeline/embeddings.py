"""Embedding and rerank-scoring tasks for any protocol: inputs tokenized as llama-server
does, one task per input, the vectors (or scores) and each input's token count back."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.media import prompt as media_prompt
from pyllama.server.pipeline import results, tasks
from pyllama.server.state import ServerState

__all__ = ["embed", "pooled", "pooling_none"]


async def embed(
    state: ServerState,
    request: Request,
    inputs: Any,
    normalize: int | None,
    kind: _core.TaskKind = _core.TaskKind.EMBEDDING,
) -> tuple[list[list[list[float]]], list[int]]:
    """Each input's rows (one pooled vector, or one a token with ``--pooling none``) and
    each input's token count."""
    if not (state.settings.embeddings or state.settings.reranking):
        raise APIError(501, "This server does not support embeddings. Start it with `--embeddings`")
    model, _ = state.require()
    if inputs is None:
        raise APIError(400, "'input' or 'content' is required")
    # llama-server's JSON prompts with media ({"prompt_string", "multimodal_data"})
    inputs = await media_prompt.resolve_prompts(state.projector, inputs)
    prompts = tasks.tokenize_prompts(model, inputs)
    if normalize is None:
        normalize = state.settings.embd_normalize
    if pooling_none(state):
        normalize = -1  # as llama-server: each token's raw row, never normalized
    jobs = []
    for p in prompts:
        t = _core.TaskParams()
        t.kind = kind
        if isinstance(p, _core.MediaPrompt):
            t.set_prompt(p)
        else:
            t.prompt = p
        t.embd_normalize = normalize
        jobs.append(t)
    streams = tasks.submit(state, jobs)
    done = await results.collect(streams, 1, request.receive)
    return [_rows(r.final) for r in done if r.final is not None], [len(p) for p in prompts]


def _rows(final: _core.Event) -> list[list[float]]:
    """An input's vectors: one pooled row, or one a token with ``--pooling none``."""
    flat = final.embedding  # a new list at each read
    n = max(1, final.n_embd_rows)
    if n == 1:
        return [flat]
    width = len(flat) // n
    return [flat[i * width : (i + 1) * width] for i in range(n)]


def pooled(state: ServerState, rows: list[list[list[float]]], route: str) -> list[list[float]]:
    """One vector an input, for the protocols that have no room for a token's rows."""
    if pooling_none(state):
        raise APIError(
            400,
            f"{route} answers one vector an input; pooling type 'none' gives one a token: "
            "start the server with another --pooling, or use /embeddings",
        )
    return [r[0] for r in rows]


def pooling_none(state: ServerState) -> bool:
    """``--pooling none``, or a model whose own pooling is none (a generative model's)."""
    engine = state.engine
    return state.settings.pooling == "none" or (engine is not None and engine.engine.pooling == 0)
