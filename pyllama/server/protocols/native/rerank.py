"""/rerank (/reranking, /v1/rerank, /v1/reranking): a query scored against documents by a
reranking model (rank pooling). Jina's shape (``documents`` -> ``results`` with
``relevance_score``) or TEI's (``texts`` -> a bare list with ``score``)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import AnyObject, json_response, parse
from pyllama.server.pipeline import results, tasks

__all__ = ["ROUTES", "rerank_tokens"]


def rerank_tokens(model: _core.Model, query: str, doc: str) -> list[int]:
    """The model's "rerank" template if it has one, else [BOS] query [EOS] [SEP] doc [EOS]."""
    template = model.chat_template("rerank")
    if template:
        prompt = template.replace("{query}", query).replace("{document}", doc)
        return model.tokenize(prompt, False, True)
    eos = model.token_eos if model.token_eos >= 0 else model.token_sep
    out = [model.token_bos] if model.add_bos else []
    out += model.tokenize(query, False, False)
    if model.add_eos:
        out.append(eos)
    if model.add_sep:
        out.append(model.token_sep)
    out += model.tokenize(doc, False, False)
    if model.add_eos:
        out.append(eos)
    return out


def _documents(body: dict[str, Any]) -> tuple[str, list[str], bool]:
    query = body.get("query")
    if "query" not in body:
        raise APIError(400, '"query" must be provided')
    if not isinstance(query, str):
        raise APIError(400, '"query" must be a string')
    tei = "texts" in body
    docs = body.get("documents", body.get("texts"))
    if not isinstance(docs, list) or not docs or not all(isinstance(d, str) for d in docs):
        raise APIError(400, '"documents" must be a non-empty string array')
    return query, docs, tei


async def rerank(request: Request) -> Response:
    state = request.app.state.pyllama
    if not state.settings.reranking:
        raise APIError(
            501,
            "This server does not support reranking. Start it with `--reranking`",
            "not_supported_error",
        )
    body = (await parse(request, AnyObject)).model_dump()
    model, _ = state.require()
    query, docs, tei = _documents(body)
    top_n = body.get("top_n", len(docs))
    if not isinstance(top_n, int) or isinstance(top_n, bool):
        raise APIError(400, '"top_n" must be an integer')
    jobs = []
    for doc in docs:
        t = _core.TaskParams()
        t.kind = _core.TaskKind.RERANK
        t.prompt = rerank_tokens(model, query, doc)
        jobs.append(t)
    done = await results.collect(tasks.submit(state, jobs), 1, request.receive)
    label = "score" if tei else "relevance_score"
    rows = []
    n_tokens = 0
    for i, (r, t) in enumerate(zip(done, jobs, strict=True)):
        assert r.final is not None
        emb = list(r.final.embedding)
        row: dict[str, Any] = {"index": i, label: emb[0] if emb else -1e6}
        if tei and body.get("return_text"):
            row["text"] = docs[i]
        rows.append(row)
        n_tokens += len(t.prompt)
    rows.sort(key=lambda row: row[label], reverse=True)
    rows = rows[: max(0, top_n)]
    if tei:
        return json_response(rows)
    return json_response(
        {
            "model": body.get("model", state.model_name),
            "object": "list",
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
            "results": rows,
        }
    )


ROUTES: list[tuple[str, Any, list[str]]] = [
    (path, rerank, ["POST"]) for path in ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking")
]
