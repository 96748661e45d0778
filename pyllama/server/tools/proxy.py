"""``GET``/``POST /cors-proxy?url=...``: the web UI's way to reach an MCP server that sends
no CORS headers (``--ui-mcp-proxy``; 403 otherwise), as llama-server's.

Only headers the page names explicitly travel on: ``X-Llama-Server-Proxy-Header-<Name>``
becomes ``<Name>``. The caller's own credentials (``Authorization``, ``X-Api-Key``,
cookies) stay here. The reply is relayed as it comes, minus hop-by-hop and CORS headers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from pyllama.server.http.errors import APIError, feature_disabled

__all__ = ["ROUTES"]

PREFIX = "x-llama-server-proxy-header-"
TIMEOUT_S = 600.0
# never forwarded: recomputed here, or would make the body something we do not relay
_REQUEST_DROP = frozenset({"accept-encoding", "transfer-encoding", "content-length", "host"})
_RESPONSE_DROP = frozenset({"server", "transfer-encoding", "content-length", "keep-alive", "date"})
_NO_BODY = frozenset({204, 304})


def _target(request: Request) -> str:
    url = request.query_params.get("url", "")
    parts = urlsplit(url)
    if not parts.hostname:
        raise APIError(400, "invalid target URL: missing host")
    if parts.password:
        raise APIError(400, "authentication in target URL is not supported")
    if parts.scheme not in ("http", "https"):
        raise APIError(400, f"unsupported URL scheme in target URL: {parts.scheme}")
    return url


async def proxy(request: Request) -> Response:
    if not getattr(request.app.state, "cors_proxy", False):
        raise feature_disabled()
    url = _target(request)
    headers = {"accept-encoding": "identity"}
    for key, value in request.headers.items():
        name = key.lower()[len(PREFIX) :] if key.lower().startswith(PREFIX) else ""
        if name and name not in _REQUEST_DROP:
            headers[name] = value
    body = await request.body() if request.method == "POST" else None
    client = httpx.AsyncClient(follow_redirects=True, timeout=TIMEOUT_S)
    try:
        upstream = await client.send(
            client.build_request(request.method, url, headers=headers, content=body), stream=True
        )
    except httpx.HTTPError as e:
        await client.aclose()
        raise APIError(502, f"proxy request to {url} failed: {e}", "server_error") from None
    out = {
        k: v
        for k, v in upstream.headers.items()
        if k.lower() not in _RESPONSE_DROP and not k.lower().startswith("access-control-")
    }

    async def close() -> None:
        await upstream.aclose()
        await client.aclose()

    if upstream.status_code in _NO_BODY:
        await close()
        return Response(status_code=upstream.status_code, headers=out)

    async def relay() -> AsyncIterator[bytes]:
        async for chunk in upstream.aiter_raw():
            yield chunk

    return StreamingResponse(
        relay(), status_code=upstream.status_code, headers=out, background=BackgroundTask(close)
    )


ROUTES = [
    ("/cors-proxy", proxy, ["GET"]),
    ("/cors-proxy", proxy, ["POST"]),
]
