"""OpenAI's Files and Batch API: ``/v1/files`` (upload, list, retrieve, content, delete) and
``/v1/batches`` (create, retrieve, list, cancel), with OpenAI's shapes. With several
``--api-key`` s each key sees only its own files and batches (the owner is a digest of the
key, never the key)."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from pyllama.server.batch.runner import ENDPOINTS, BatchRunner
from pyllama.server.batch.store import BatchRow, BatchStore, new_id
from pyllama.server.batch.upload import receive_upload
from pyllama.server.http.errors import APIError

__all__ = ["ROUTES", "UPLOAD_PATHS"]

PURPOSES = ("batch", "batch_output", "assistants", "fine-tune", "vision", "user_data", "evals")
UPLOAD_PATHS = frozenset({"/v1/files", "/files"})


def _batch_state(request: Request) -> tuple[BatchStore, BatchRunner, Any]:
    state = request.app.state.pyllama
    if state.batches is None:
        raise APIError(
            404, "the Files and Batch API is off on this server (--no-batch, or its --batch-dir "
            "could not be opened: see the server's log)",
        )  # fmt: skip
    return state.batches.store, state.batches.runner, state.settings


def _owner(request: Request, settings: Any) -> str:
    if not settings.api_keys:
        return ""
    key = request.headers.get("x-api-key")
    auth = request.headers.get("authorization", "")
    if key is None and auth[:7].lower() == "bearer ":
        key = auth[7:].strip()
    return hashlib.sha256((key or "").encode()).hexdigest()[:32]


def _not_found(what: str, id_: str) -> APIError:
    return APIError(404, f"No such {what}: '{id_}'")


def _page(items: list[dict[str, Any]], request: Request) -> dict[str, Any]:
    after = request.query_params.get("after")
    if after is not None:
        ids = [i["id"] for i in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    try:
        limit = int(request.query_params.get("limit", "10000"))
    except ValueError as e:
        raise APIError(400, "limit must be an integer") from e
    page = items[: max(1, min(limit, 10000))]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > len(page),
    }


async def upload_file(request: Request) -> Response:
    store, _, settings = _batch_state(request)
    temp = store.temp_path()
    try:
        form = await receive_upload(
            request.stream(), request.headers.get("content-type", ""), temp,
            settings.batch.max_file_bytes,
        )  # fmt: skip
        purpose = form.fields.get("purpose")
        if purpose not in PURPOSES:
            raise APIError(400, f"purpose must be one of {', '.join(PURPOSES)}", param="purpose")
        if form.filename is None:
            raise APIError(400, "the form holds no file part ('file')", param="file")
        row = store.add_file(_owner(request, settings), purpose, form.filename, temp)
    finally:
        temp.unlink(missing_ok=True)
    return JSONResponse(row.api())


async def list_files(request: Request) -> Response:
    store, _, settings = _batch_state(request)
    rows = store.files(_owner(request, settings), request.query_params.get("purpose"))
    items = [r.api() for r in rows]
    if request.query_params.get("order", "desc") == "desc":
        items.reverse()
    return JSONResponse(_page(items, request))


def _file(request: Request) -> tuple[BatchStore, Any]:
    store, _, settings = _batch_state(request)
    file_id = request.path_params["file_id"]
    row = store.file(file_id, _owner(request, settings))
    if row is None:
        raise _not_found("file", file_id)
    return store, row


async def retrieve_file(request: Request) -> Response:
    _, row = _file(request)
    return JSONResponse(row.api())


async def file_content(request: Request) -> Response:
    store, row = _file(request)
    return FileResponse(store.path(row.id), media_type="application/octet-stream")


async def delete_file(request: Request) -> Response:
    store, row = _file(request)
    store.delete_file(row.id, row.owner)
    return JSONResponse({"id": row.id, "object": "file", "deleted": True})


async def create_batch(request: Request) -> Response:
    store, runner, settings = _batch_state(request)
    try:
        body = json.loads(await request.body())
    except ValueError as e:
        raise APIError(400, f"the request body is not valid JSON: {e}") from e
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object")
    endpoint = body.get("endpoint")
    if endpoint not in ENDPOINTS:
        raise APIError(400, f"endpoint must be one of {', '.join(ENDPOINTS)}", param="endpoint")
    if body.get("completion_window") != "24h":
        raise APIError(400, "completion_window must be '24h'", param="completion_window")
    metadata = body.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict)
        or len(metadata) > 16
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        raise APIError(
            400, "metadata must be an object of at most 16 string values", param="metadata"
        )
    owner = _owner(request, settings)
    file_id = body.get("input_file_id")
    source = store.file(file_id, owner) if isinstance(file_id, str) else None
    if source is None:
        raise APIError(400, f"input_file_id: no such file '{file_id}'", param="input_file_id")
    if source.purpose != "batch":
        raise APIError(400, "the input file's purpose must be 'batch'", param="input_file_id")
    if endpoint == "/v1/embeddings" and not settings.embeddings:
        raise APIError(
            400, "this server serves no embeddings (start it with --embeddings)", param="endpoint"
        )
    now = int(time.time())
    row = BatchRow(
        new_id("batch"), owner, endpoint, source.id, "24h", metadata, "validating", None, now,
        now + settings.batch.window_seconds, {}, None, None, 0,
    )  # fmt: skip
    store.add_batch(row)
    runner.wake()
    return JSONResponse(row.api())


def _batch(request: Request) -> tuple[BatchStore, BatchRunner, BatchRow]:
    store, runner, settings = _batch_state(request)
    batch_id = request.path_params["batch_id"]
    row = store.batch(batch_id, _owner(request, settings))
    if row is None:
        raise _not_found("batch", batch_id)
    return store, runner, row


async def retrieve_batch(request: Request) -> Response:
    _, _, row = _batch(request)
    return JSONResponse(row.api())


async def list_batches(request: Request) -> Response:
    store, _, settings = _batch_state(request)
    items = [r.api() for r in store.batches(_owner(request, settings))]
    return JSONResponse(_page(items, request))


async def cancel_batch(request: Request) -> Response:
    store, runner, row = _batch(request)
    store.cancel(row.id)
    runner.wake()
    updated = store.batch(row.id)
    assert updated is not None
    return JSONResponse(updated.api())


ROUTES: list[tuple[str, Any, list[str]]] = [
    (f"{prefix}/files", upload_file, ["POST"]) for prefix in ("/v1", "")
] + [
    (path, fn, methods)
    for prefix in ("/v1", "")
    for path, fn, methods in (
        (f"{prefix}/files", list_files, ["GET"]),
        (f"{prefix}/files/{{file_id}}", retrieve_file, ["GET"]),
        (f"{prefix}/files/{{file_id}}", delete_file, ["DELETE"]),
        (f"{prefix}/files/{{file_id}}/content", file_content, ["GET"]),
        (f"{prefix}/batches", create_batch, ["POST"]),
        (f"{prefix}/batches", list_batches, ["GET"]),
        (f"{prefix}/batches/{{batch_id}}", retrieve_batch, ["GET"]),
        (f"{prefix}/batches/{{batch_id}}/cancel", cancel_batch, ["POST"]),
    )
]
