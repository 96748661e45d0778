"""One media reference to its bytes, by llama-server's rules (``handle_media`` in
tools/server/server-common.cpp): a ``data:`` URI, raw base64, ``file://`` under
``--media-path``, or an http(s) URL (10 MiB, 10 s). pyllama refuses http(s) URLs whose
host resolves to a loopback, private, link-local or reserved address unless the server
runs with ``--media-allow-private``: a client must not make the server fetch its own
network. Every failure is a 400 naming the reason."""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import socket
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from pyllama.server.http.errors import APIError

__all__ = ["MAX_REMOTE_BYTES", "REMOTE_TIMEOUT_S", "decode_base64", "load"]

MAX_REMOTE_BYTES = 10 * 1024 * 1024  # as llama-server
REMOTE_TIMEOUT_S = 10.0
MAX_REDIRECTS = 5  # hops a media URL may take
MAX_FILE_BYTES = 64 * 1024 * 1024  # a --media-path file


def decode_base64(data: str) -> bytes:
    """Strict base64 (whitespace allowed, as in wrapped data); 400 when it does not decode."""
    try:
        out = base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError) as e:
        raise APIError(400, f"Invalid base64 value: {e}") from e
    if not out:
        raise APIError(400, "Invalid base64 value: empty")
    return out


def _data_uri(url: str) -> bytes:
    head, sep, data = url.partition(",")
    if not sep or "," in data:
        raise APIError(400, "Invalid uri-encoded base64 value")
    if not head.startswith(("data:image/", "data:video/", "data:audio/")):
        raise APIError(400, f"Invalid uri format: {head}")
    if not head.endswith("base64"):
        raise APIError(400, "uri must be base64 encoded")
    return decode_base64(data)


def _local_file(url: str, media_path: str | None) -> bytes:
    if media_path is None:
        raise APIError(400, "file:// URLs are not allowed unless --media-path is specified")
    rel = url[len("file://") :]
    # as llama-server (media_path + path): leading slashes stay under --media-path, and the
    # path is judged by its text (no "..", no drive or root); links the server's owner put
    # under --media-path are followed, as llama-server follows them
    inner = rel.lstrip("/")
    if not inner or Path(inner).is_absolute() or Path(inner).drive or ".." in Path(inner).parts:
        raise APIError(400, f"file path is not allowed: {rel}")
    target = Path(media_path) / inner
    try:
        if target.stat().st_size > MAX_FILE_BYTES:
            raise APIError(400, f"file is larger than {MAX_FILE_BYTES >> 20} MiB: {rel}")
        return target.read_bytes()
    except OSError as e:
        raise APIError(400, f"file does not exist or cannot be opened: {rel}") from e


def _forbidden(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return not addr.is_global or addr.is_multicast


async def _check_host(url: str, allow_private: bool) -> None:
    """A media URL's scheme and host, and (unless allowed) that no address of the host is
    private or local; each redirect's target is checked the same way."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise APIError(400, f"Invalid media URL: {url}")
    if allow_private:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parts.hostname, port, type=socket.SOCK_STREAM
        )
    except OSError as e:
        raise APIError(400, f"Failed to download media: cannot resolve {parts.hostname}") from e
    bad = sorted({str(info[4][0]) for info in infos if _forbidden(str(info[4][0]))})
    if bad:
        raise APIError(
            400,
            f"media URL host {parts.hostname} is a private or local address ({bad[0]}): "
            "refused (--media-allow-private allows it)",
        )


async def _remote(url: str, allow_private: bool) -> bytes:
    import httpx

    data = bytearray()
    try:
        client = httpx.AsyncClient(timeout=REMOTE_TIMEOUT_S, follow_redirects=False)
        async with client:
            # redirects followed as llama-server follows them (a hub's file goes to its
            # CDN), each target checked before it is asked
            for _ in range(MAX_REDIRECTS + 1):
                await _check_host(url, allow_private)
                async with client.stream("GET", url) as res:
                    location = res.headers.get("location")
                    if res.is_redirect and location:
                        url = urljoin(url, location)
                        continue
                    if not 200 <= res.status_code < 300:
                        raise APIError(400, f"Failed to download media: HTTP {res.status_code}")
                    async for chunk in res.aiter_bytes():
                        data += chunk
                        if len(data) > MAX_REMOTE_BYTES:
                            raise APIError(
                                400,
                                f"Failed to download media: larger than {MAX_REMOTE_BYTES >> 20} MiB",
                            )
                    return bytes(data)
    except httpx.HTTPError as e:
        raise APIError(400, f"Failed to download media: {type(e).__name__}") from e
    raise APIError(400, f"Failed to download media: more than {MAX_REDIRECTS} redirects")


async def load(url: str, *, media_path: str | None, allow_private: bool) -> bytes:
    """The bytes a media reference stands for; APIError(400) otherwise."""
    if not isinstance(url, str) or not url:
        raise APIError(400, "a media part needs a non-empty URL or base64 string")
    if url.startswith("http"):
        return await _remote(url, allow_private)
    if url.startswith("file://"):
        return await asyncio.to_thread(_local_file, url, media_path)
    if url.startswith("data:"):
        return _data_uri(url)
    return decode_base64(url)
