"""The HTTP side: Serve's proxy hands each request here; it is forwarded whole to a replica.

Ray Serve's proxy passes an HTTP request on before its body has arrived, so a router placed
behind the proxy cannot see the prompt. The ingress reads the body first, hashes the prompt's
blocks (``pyllama.serve.prefix``), and calls the model deployment through a handle whose
router (``PrefixAffinityRouter``) can read them. The response streams back part by part.
Several ingress replicas run (``ingress_replicas``, 2 by default): their routers share what the
replicas report and place new prompts alike (``pyllama.serve.placement``), and one that dies
loses only the requests it was carrying.

A request whose replica dies before the response starts (a non-streamed answer starts only
when it is complete) is sent again to another replica, up to ``retries`` times, then it is
a 503 in the OpenAI error shape; a stream whose replica dies mid-way ends with an error in
the stream's own framing. Past ``max_queued_requests`` waiting for a replica, a request is
a 503 at once (with ``Retry-After``). ``/metrics``, ``POST /lora-adapters`` and slot actions
go to every replica (``broadcast``). Under a route prefix (``serve run --route-prefix``)
the prefix is taken off the path before the replica sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from ray import serve
from ray.serve.exceptions import BackPressureError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from pyllama.serve.inproc import Forwarded, ResponseStart
from pyllama.serve.prefix import BLOCK_BYTES, block_hashes, prompt_text
from pyllama.serve.rayserve.broadcast import is_broadcast, live_replicas, merge_metrics

__all__ = ["PyllamaIngress", "stream_error"]

log = logging.getLogger("pyllama.serve")

BROADCAST_TIMEOUT_S = 30.0  # a replica that cannot take a broadcast this long is left out
RETRY_AFTER_S = 1


def _error(
    status: int, message: str, kind: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = {"error": {"code": status, "message": message, "type": kind}}
    return JSONResponse(body, status, headers=headers)


def stream_error(content_type: str, message: str) -> bytes:
    """A last part saying the stream failed, in the framing its client reads."""
    err = {"code": 503, "message": message, "type": "unavailable_error"}
    if content_type.startswith("text/event-stream"):
        return b"data: " + json.dumps({"error": err}).encode() + b"\n\n"
    if content_type.startswith("application/x-ndjson"):
        return json.dumps({"error": message}).encode() + b"\n"
    return b""  # a plain body cannot carry an error once begun: it ends short


def _path(scope: dict[str, Any]) -> str:
    """The path as the replica knows it: without Serve's route prefix (the root path)."""
    path, root = scope.get("path", "/"), scope.get("root_path", "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :] or "/"
    return path


class PyllamaIngress:
    def __init__(
        self,
        replicas: Any,
        block_bytes: int = BLOCK_BYTES,
        max_body_bytes: int = 64 << 20,
        retries: int = 3,
    ) -> None:
        self._handle = replicas
        self._replicas = replicas.options(stream=True)
        self._retries = retries
        self._block_bytes = block_bytes
        self._max_body = max_body_bytes
        try:
            self._me = serve.get_replica_context().replica_id.unique_id
        except Exception:  # built outside a Serve replica (a unit test)
            self._me = ""

    def _blocks(self, body: bytes) -> tuple[int, ...]:
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            return ()  # the replica answers bad JSON with its 400
        if not isinstance(doc, dict):
            return ()
        return block_hashes(prompt_text(doc), self._block_bytes)

    async def __call__(self, request: Request) -> Response:
        body = bytearray()
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > self._max_body:
                    return _error(413, "request body too large", "invalid_request_error")
        except ClientDisconnect:
            return Response(status_code=499)
        client = request.scope.get("client")
        path = _path(request.scope)
        req = Forwarded(
            method=request.method,
            path=path,
            query_string=request.scope.get("query_string", b""),
            headers=list(request.scope.get("headers", [])),
            body=bytes(body),
            client=tuple(client) if client else None,
            prefix_blocks=self._blocks(bytes(body)) if request.method == "POST" else (),
            origin=self._me,
        )
        if is_broadcast(req.method, path):
            return await self._broadcast(req)
        return await self._forward(req)

    async def _start(self, req: Forwarded) -> tuple[ResponseStart, Any] | Response:
        """The replica's first part and the rest of its answer, or the error response."""
        why = ""
        for attempt in range(1 + self._retries):
            if attempt:
                await asyncio.sleep(0.25 * 2**attempt)  # until the router hears of the death
            gen = self._replicas.handle.remote(req)
            try:
                start = await gen.__anext__()
                assert isinstance(start, ResponseStart)
                return start, gen
            except BackPressureError as e:  # too many wait already: no point retrying
                return _error(
                    503,
                    f"server busy: {e.message}",
                    "unavailable_error",
                    {"Retry-After": str(RETRY_AFTER_S)},
                )
            except StopAsyncIteration:
                why = "the replica ended the request without an answer"
            except Exception as e:  # the replica died or was removed before answering
                why = f"replica unavailable: {type(e).__name__}"
            log.warning("%s %s, attempt %d: %s", req.method, req.path, attempt + 1, why)
        return _error(503, why, "unavailable_error")

    async def _forward(self, req: Forwarded) -> Response:
        started = await self._start(req)
        if isinstance(started, Response):
            return started
        start, gen = started
        content_type = next(
            (v.decode("latin-1") for k, v in start.headers if k.lower() == b"content-type"), ""
        )

        async def rest() -> AsyncIterator[bytes]:
            ended = False
            try:
                async for part in gen:
                    yield part
                ended = True
            except Exception as e:  # the replica died mid-stream
                ended = True
                tail = stream_error(content_type, f"replica failed: {type(e).__name__}")
                if tail:
                    yield tail
            finally:
                if not ended:  # the client went away: cancelling frees the replica's slot
                    with contextlib.suppress(Exception):
                        gen.cancel()

        out = StreamingResponse(rest(), status_code=start.status)
        out.raw_headers = [*start.headers, (b"x-pyllama-ingress", self._me.encode())]
        return out

    async def _replica_ids(self) -> tuple[str, ...]:
        """The replicas this process's router knows (a first call sets the router up)."""
        app, name = self._handle.app_name, self._handle.deployment_name
        if not live_replicas(app, name):
            await self._start(Forwarded("GET", "/health", origin=self._me))
        return live_replicas(app, name)

    async def _one(self, req: Forwarded, replica: str) -> tuple[int, list, bytes]:
        started = await self._start(dataclasses.replace(req, to_replica=replica))
        if isinstance(started, Response):
            return started.status_code, list(started.raw_headers), bytes(started.body)
        start, gen = started
        body = b"".join([part async for part in gen])
        return start.status, start.headers, body

    async def _broadcast(self, req: Forwarded) -> Response:
        ids = await self._replica_ids()
        if not ids:
            return _error(503, "no replica is running", "unavailable_error")
        # one replica after the other: Serve gives a replica's handle calls the internal
        # request id of the request it is serving, and its router matches a chosen replica
        # to a waiting call by that id, so calls made together could swap their replicas
        done: list[tuple[int, list, bytes] | BaseException] = []
        for r in ids:
            try:
                done.append(await asyncio.wait_for(self._one(req, r), BROADCAST_TIMEOUT_S))
            except Exception as e:
                done.append(e)
        answers = [(r, a) for r, a in zip(ids, done) if not isinstance(a, BaseException)]
        who = {"x-pyllama-replicas": ",".join(r for r, _ in answers)}
        if not answers:
            return _error(503, "no replica answered", "unavailable_error")
        if req.path == "/metrics":
            ok = [(r, body.decode("utf-8", "replace")) for r, (s, _, body) in answers if s == 200]
            if not ok:
                status, _, body = answers[0][1]
                return Response(body, status, headers=who)
            return Response(merge_metrics(ok), 200, headers=who, media_type="text/plain")
        failed = [a for _, a in answers if a[0] >= 300]
        status, headers, body = (failed or [answers[0][1]])[0]
        if len(answers) < len(ids) and not failed:  # someone missed it: say so
            return _error(503, "not every replica took the change", "unavailable_error", who)
        out = Response(body, status, headers=who)
        out.raw_headers += [(k, v) for k, v in headers if k.lower() == b"content-type"]
        return out
