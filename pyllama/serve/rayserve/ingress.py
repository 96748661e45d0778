"""The HTTP side: Serve's proxy hands each request here; it is forwarded whole to a replica.

Ray Serve's proxy passes an HTTP request on before its body has arrived, so a router placed
behind the proxy cannot see the prompt. The ingress reads the body first, hashes the prompt's
blocks (``pyllama.serve.prefix``), and calls the model deployment through a handle whose
router (``PrefixAffinityRouter``) can read them. The response streams back part by part.
A request whose replica dies before the response starts (a non-streamed answer starts only
when it is complete) is sent again to another replica, up to ``retries`` times, then it is
a 503 in the OpenAI error shape; a stream whose replica dies mid-way ends with an error in
the stream's own framing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from pyllama.serve.inproc import Forwarded, ResponseStart
from pyllama.serve.prefix import BLOCK_BYTES, block_hashes, prompt_text

__all__ = ["PyllamaIngress", "stream_error"]

log = logging.getLogger("pyllama.serve")


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"code": status, "message": message, "type": kind}}, status)


def stream_error(content_type: str, message: str) -> bytes:
    """A last part saying the stream failed, in the framing its client reads."""
    err = {"code": 503, "message": message, "type": "unavailable_error"}
    if content_type.startswith("text/event-stream"):
        return b"data: " + json.dumps({"error": err}).encode() + b"\n\n"
    if content_type.startswith("application/x-ndjson"):
        return json.dumps({"error": message}).encode() + b"\n"
    return b""  # a plain body cannot carry an error once begun: it ends short


class PyllamaIngress:
    def __init__(
        self,
        replicas: Any,
        block_bytes: int = BLOCK_BYTES,
        max_body_bytes: int = 64 << 20,
        retries: int = 3,
    ) -> None:
        self._replicas = replicas.options(stream=True)
        self._retries = retries
        self._block_bytes = block_bytes
        self._max_body = max_body_bytes

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
        req = Forwarded(
            method=request.method,
            path=request.url.path,
            query_string=request.scope.get("query_string", b""),
            headers=list(request.scope.get("headers", [])),
            body=bytes(body),
            client=tuple(client) if client else None,
            prefix_blocks=self._blocks(bytes(body)) if request.method == "POST" else (),
        )
        why = ""
        for attempt in range(1 + self._retries):
            if attempt:
                await asyncio.sleep(0.25 * 2**attempt)  # until the router hears of the death
            gen = self._replicas.handle.remote(req)
            try:
                start = await gen.__anext__()
                break
            except StopAsyncIteration:
                why = "the replica ended the request without an answer"
            except Exception as e:  # the replica died or was removed before answering
                why = f"replica unavailable: {type(e).__name__}"
            log.warning("%s %s, attempt %d: %s", req.method, req.path, attempt + 1, why)
        else:
            return _error(503, why, "unavailable_error")
        assert isinstance(start, ResponseStart)
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
        out.raw_headers = list(start.headers)
        return out
