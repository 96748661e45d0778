"""The batch runner: one task on the server's event loop that drives every unfinished batch
through OpenAI's states (validating -> in_progress -> finalizing -> completed; failed,
expired, cancelling -> cancelled), oldest first.

Each line is served by the server's own routes, in this process (an ASGI call, ``_call``),
as a request to its endpoint: the same answer a client would get, through the same
pipeline. The owner was checked when the batch was created, so the lines go past the HTTP
middleware (API keys, CORS, body limit) straight to the routes. At most ``parallel`` lines
are in flight, fewer than the server's slots, so interactive requests still find room.
A line's answer is recorded once (``BatchStore.record``), and a restart resumes a batch with
the lines not yet answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware

from pyllama.server.batch.store import BatchStore, new_id
from pyllama.server.http.errors import APIError, handle_api_error, handle_http_error

__all__ = ["ENDPOINTS", "BatchRunner", "Line", "read_lines"]

log = logging.getLogger("pyllama.server.batch")

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses")
RETRY_SECONDS = 0.5
PRIORITISED = ("/v1/chat/completions", "/v1/completions")  # the endpoints with ``priority``


@dataclass
class Line:
    idx: int
    custom_id: str
    body: bytes


def _error(line: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    return {"code": code, "line": line, "message": message, "param": param}


def read_lines(path: str, endpoint: str, max_lines: int) -> tuple[list[Line], list[dict[str, Any]]]:
    """The input file's requests, or the errors that fail its validation (lines numbered
    from 1, as OpenAI names them)."""
    lines: list[Line] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            if len(errors) >= 100:
                break
            if not raw.strip():
                continue
            if len(lines) >= max_lines:
                errors.append(
                    _error(n, "too_many_requests", f"the file holds more than {max_lines} requests")
                )
                break
            try:
                req = json.loads(raw)
            except ValueError as e:
                errors.append(_error(n, "invalid_json_line", f"line {n} is not valid JSON: {e}"))
                continue
            if not isinstance(req, dict):
                errors.append(_error(n, "invalid_request", f"line {n} is not a JSON object"))
                continue
            custom_id = req.get("custom_id")
            if not isinstance(custom_id, str) or not custom_id:
                errors.append(
                    _error(n, "missing_required_parameter", "custom_id is required", "custom_id")
                )
                continue
            if custom_id in seen:
                errors.append(
                    _error(
                        n,
                        "duplicate_custom_id",
                        f"custom_id '{custom_id}' is used twice",
                        "custom_id",
                    )
                )
                continue
            seen.add(custom_id)
            if req.get("method") != "POST":
                errors.append(_error(n, "invalid_method", "method must be 'POST'", "method"))
                continue
            if req.get("url") != endpoint:
                errors.append(_error(n, "mismatched_endpoint",
                                     f"url '{req.get('url')}' is not the batch's endpoint '{endpoint}'", "url"))  # fmt: skip
                continue
            body = req.get("body")
            if not isinstance(body, dict):
                errors.append(_error(n, "invalid_request", "body must be an object", "body"))
                continue
            if body.get("stream"):
                errors.append(
                    _error(n, "invalid_request", "a batch request cannot stream", "body.stream")
                )
                continue
            lines.append(Line(len(lines), custom_id, json.dumps(body).encode()))
    if not lines and not errors:
        errors.append(_error(1, "empty_file", "the input file holds no requests"))
    return lines, errors


class BatchRunner:
    def __init__(self, store: BatchStore, app: Any, parallel: int, window_seconds: int) -> None:
        self.store = store
        self.parallel = max(1, parallel)
        self.window_seconds = window_seconds
        self.max_lines = 50_000
        self.priority = 100  # set on chat and completion lines: behind interactive requests
        self._wake = asyncio.Event()
        handlers = {APIError: handle_api_error, HTTPException: handle_http_error}
        routes = ExceptionMiddleware(app.router, handlers=handlers)

        async def internal(scope: dict[str, Any], receive: Any, send: Any) -> None:
            scope["app"] = app  # what request.app reads (Starlette sets it on the way in)
            await routes(scope, receive, send)

        self._app = internal

    def wake(self) -> None:
        """A batch was created or cancelled."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            for batch_id in self.store.unfinished() if self.store.lead() else ():
                try:
                    await self._drive(batch_id)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a batch's fault must not stop the others
                    log.exception("batch %s: the runner failed on it", batch_id)
                    self._set(
                        batch_id,
                        "failed",
                        errors=[_error(0, "server_error", "the server failed to run the batch")],
                    )
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)

    def _set(self, batch_id: str, status: str, **fields: Any) -> None:
        self.store.set_status(batch_id, status, **fields)
        log.info("batch %s: %s", batch_id, status)

    async def _drive(self, batch_id: str) -> None:
        b = self.store.batch(batch_id)
        assert b is not None
        path = str(self.store.path(b.input_file_id))
        if b.status == "validating":
            lines, errors = await asyncio.to_thread(read_lines, path, b.endpoint, self.max_lines)
            if errors:
                self._set(batch_id, "failed", errors=errors)
                return
            self._set(batch_id, "in_progress", total=len(lines))
        else:
            lines, _ = await asyncio.to_thread(read_lines, path, b.endpoint, self.max_lines)
        if self.store.status(batch_id) == "in_progress":
            await self._run_lines(batch_id, lines)
        b = self.store.batch(batch_id)
        assert b is not None
        if b.status == "in_progress" and time.time() >= b.expires_at:
            final = "expired"
        elif b.status == "in_progress":
            self._set(batch_id, "finalizing")
            final = "completed"
        elif b.status in ("finalizing", "cancelling"):
            final = "completed" if b.status == "finalizing" else "cancelled"
        else:
            return
        if final == "expired":  # what did not run is an error line each
            done = self.store.done(batch_id)
            for line in lines:
                if line.idx not in done:
                    self.store.record(batch_id, line.idx, False, _expired(line))
        out_id = self._write(batch_id, True)
        err_id = self._write(batch_id, False)
        self._set(batch_id, final, output_file_id=out_id, error_file_id=err_id)

    async def _run_lines(self, batch_id: str, lines: list[Line]) -> None:
        done = self.store.done(batch_id)
        pending = iter([line for line in lines if line.idx not in done])
        b = self.store.batch(batch_id)
        assert b is not None
        expires_at = b.expires_at

        def stopped() -> bool:
            return self.store.status(batch_id) != "in_progress" or time.time() >= expires_at

        async def worker(it: Iterator[Line]) -> None:
            for line in it:
                while True:
                    if stopped():
                        return
                    answer = await self._serve(
                        batch_id, b.endpoint, self._prioritised(line, b.endpoint)
                    )
                    if answer is not None:
                        break
                    await asyncio.sleep(RETRY_SECONDS)  # the model loads, or the queue is full
                self.store.record(batch_id, line.idx, *answer)

        await asyncio.gather(*(worker(pending) for _ in range(self.parallel)))

    def _prioritised(self, line: Line, endpoint: str) -> Line:
        """The line with the batch priority, where its endpoint takes one (a line's own
        ``priority`` is replaced: batch work never outranks interactive work)."""
        if endpoint not in PRIORITISED:
            return line
        body = {**json.loads(line.body), "priority": self.priority}
        return Line(line.idx, line.custom_id, json.dumps(body).encode())

    async def _serve(
        self, batch_id: str, endpoint: str, line: Line
    ) -> tuple[bool, dict[str, Any]] | None:
        """(whether it succeeded, its output line); None for a 503 (loading, asleep, the
        queue full): the line is tried again."""
        status, body = 500, b""
        try:
            status, body = await self._call(endpoint, line.body)
            answer: Any = json.loads(body) if body else None
        except ValueError:
            answer = body.decode("utf-8", errors="replace")
        except Exception as e:  # the route raised past its error handlers: a 500, this line only
            log.exception("batch %s: line %s raised", batch_id, line.custom_id)
            status, answer = 500, {"error": {"message": f"internal error: {type(e).__name__}: {e}"}}
        if status == 503:
            return None
        ok = 200 <= status < 300
        result = {
            "id": new_id("batch_req"),
            "custom_id": line.custom_id,
            "response": {"status_code": status, "request_id": new_id("req"), "body": answer},
            "error": None,
        }
        return ok, result

    async def _call(self, path: str, body: bytes) -> tuple[int, bytes]:
        """POST ``body`` to the app's route at ``path``, in this process: (status, body)."""
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1", "method": "POST", "scheme": "http", "path": path,
            "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"content-type", b"application/json")], "client": None,
            "server": ("127.0.0.1", 80), "state": {},
        }  # fmt: skip
        sent = False
        status, parts = 500, []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # no disconnect: the line waits for its answer
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                parts.append(bytes(message.get("body", b"")))

        await self._app(scope, receive, send)
        return status, b"".join(parts)

    def _write(self, batch_id: str, ok: bool) -> str | None:
        """The output (ok) or error file, from the recorded answers in line order."""
        temp = self.store.temp_path()
        n = 0
        with open(temp, "w", encoding="utf-8") as f:
            for text in self.store.results(batch_id, ok):
                f.write(text + "\n")
                n += 1
        if n == 0:
            temp.unlink()
            return None
        b = self.store.batch(batch_id)
        assert b is not None
        purpose = "batch_output"
        name = f"{batch_id}_{'output' if ok else 'error'}.jsonl"
        return self.store.add_file(b.owner, purpose, name, temp).id


def _expired(line: Line) -> dict[str, Any]:
    return {
        "id": new_id("batch_req"),
        "custom_id": line.custom_id,
        "response": None,
        "error": {"code": "batch_expired", "message": "the batch expired before this request ran"},
    }
