"""Embeddings in one context, as llama-cpp-python's ``Llama.embed``: texts packed into
batches of up to ``n_batch`` tokens, one sequence per text, the cache cleared before
each batch."""

from __future__ import annotations

from typing import Any

import numpy as np

from pyllama import _core

__all__ = ["embed_texts", "embedding_response"]


def _normalized(v: np.ndarray, normalize: bool) -> list[float]:
    if normalize:
        norm = float(np.linalg.norm(v))
        v = v / norm if norm > 0 else v
    return v.tolist()


def embed_texts(
    model: _core.Model,
    ctx: _core.Context,
    input: str | list[str],
    n_batch: int,
    normalize: bool,
    truncate: bool,
) -> tuple[list[Any], int]:
    """(one vector per text, or per-token vectors when the context pools nothing; the
    number of tokens embedded)."""
    texts = [input] if isinstance(input, str) else list(input)
    per_token = ctx.pooling == 0
    limit = min(n_batch, ctx.n_ctx)
    out: list[Any] = []
    total = 0
    pending: list[list[int]] = []

    def flush() -> None:
        batch = _core.Batch(sum(len(t) for t in pending), 1)
        for seq, toks in enumerate(pending):
            batch.add_sequence(toks, 0, seq, False)
        for k in range(len(batch)):
            batch.set_logits(k, True)
        ctx.memory_clear(True)
        ctx.decode(batch)
        row = 0
        for seq, toks in enumerate(pending):
            if per_token:
                out.append(
                    [
                        _normalized(np.asarray(ctx.embeddings_ith(row + k)), normalize)
                        for k in range(len(toks))
                    ]
                )
            else:
                out.append(_normalized(np.asarray(ctx.embeddings_seq(seq)), normalize))
            row += len(toks)
        pending.clear()

    for text in texts:
        toks = model.tokenize(text, True, False)
        if truncate:
            toks = toks[:limit]
        if len(toks) > limit:
            raise ValueError(f"Requested tokens ({len(toks)}) exceed batch size of {limit}")
        toks = toks or [model.token_bos]
        total += len(toks)
        if pending and (
            sum(len(t) for t in pending) + len(toks) > limit or len(pending) >= ctx.n_seq_max
        ):
            flush()
        pending.append(toks)
    if pending:
        flush()
    ctx.memory_clear(True)
    return out, total


def embedding_response(vectors: list[Any], n_tokens: int, model: str) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
    }
