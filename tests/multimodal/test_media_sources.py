"""pyllama.server.media.sources: where media bytes may come from (llama-server's
handle_media, plus the refusal of private addresses), against a real local HTTP server."""

from __future__ import annotations

import asyncio
import base64
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyllama.server.http.errors import APIError
from pyllama.server.media import sources

from helpers.media import png

IMAGE = png(16, 16, seed=3)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/cat.png":
            body = IMAGE
        elif self.path == "/big.bin":
            body = b"\0" * (sources.MAX_REMOTE_BYTES + 1)
        elif self.path in ("/moved", "/loop"):
            self.send_response(302)
            self.send_header("Location", "/cat.png" if self.path == "/moved" else "/loop")
            self.end_headers()
            return
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def load(url: str, *, media_path: str | None = None, allow_private: bool = False) -> bytes:
    async def run() -> bytes:
        try:
            return await sources.load(url, media_path=media_path, allow_private=allow_private)
        finally:  # closed connections' transports finish closing before the loop goes
            await asyncio.sleep(0.05)

    return asyncio.run(run())


def _fails(url: str, message: str, **kw: object) -> None:
    with pytest.raises(APIError) as e:
        load(url, **kw)  # type: ignore[arg-type]
    assert e.value.status == 400
    assert message in e.value.message


def test_data_uri_and_raw_base64() -> None:
    encoded = base64.b64encode(IMAGE).decode()
    assert load(f"data:image/png;base64,{encoded}") == IMAGE
    assert load(encoded) == IMAGE
    assert load("data:audio/wav;base64," + encoded[:8] + "\n" + encoded[8:]) == IMAGE
    _fails("data:image/png;base64,a,b", "Invalid uri-encoded base64 value")
    _fails("data:application/pdf;base64,AAAA", "Invalid uri format")
    _fails("!!!", "Invalid base64")
    _fails("", "non-empty")


def test_remote_needs_a_public_address(web: str) -> None:
    _fails(web + "/cat.png", "private or local address")
    _fails("http://[::1]:9/x.png", "private or local address")
    _fails("http://10.1.2.3/x.png", "private or local address")
    _fails("http:///x.png", "Invalid media URL")


def test_remote_download_when_allowed(web: str) -> None:
    assert load(web + "/cat.png", allow_private=True) == IMAGE
    _fails(web + "/missing.png", "HTTP 404", allow_private=True)
    assert load(web + "/moved", allow_private=True) == IMAGE  # as llama-server: followed
    _fails(web + "/loop", "more than 5 redirects", allow_private=True)
    _fails(web + "/big.bin", "larger than 10 MiB", allow_private=True)
    _fails("http://127.0.0.1:9/x.png", "Failed to download media", allow_private=True)


def test_local_files(tmp_path: Path) -> None:
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "a.png").write_bytes(IMAGE)
    (tmp_path / "outside.png").write_bytes(IMAGE)
    root = str(tmp_path / "media")
    assert load("file://a.png", media_path=root) == IMAGE
    _fails("file://a.png", "--media-path")
    _fails("file://../outside.png", "not allowed", media_path=root)
    # as llama-server (media_path + path): leading slashes stay under --media-path
    _fails("file:///etc/hostname", "cannot be opened", media_path=root)
    assert load("file:////a.png", media_path=root) == IMAGE
    # a link the server's owner put under --media-path is followed, as llama-server does
    (tmp_path / "media" / "shared").symlink_to(tmp_path)
    assert load("file://shared/outside.png", media_path=root) == IMAGE
    _fails("file://shared/../outside.png", "not allowed", media_path=root)
    _fails("file://nope.png", "cannot be opened", media_path=root)
