"""``/cors-proxy?url=`` (``--ui-mcp-proxy``): relays a request to another server, passing
on only the headers named by ``X-Llama-Server-Proxy-Header-*``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx
import pytest

from helpers.servers import running_server


class _Target(BaseHTTPRequestHandler):
    seen: ClassVar[dict[str, object]] = {}

    def do_GET(self) -> None:
        _Target.seen = {
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
        }
        body = b'{"hello": "proxy"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Access-Control-Allow-Origin", "*")  # the proxy must not pass this on
        self.send_header("X-Upstream", "yes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/empty":
            self.send_response(204)
            self.end_headers()
            return
        self.send_response(201)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[::-1])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Target)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    models = tmp_path_factory.mktemp("models")
    args = ("--models-dir", str(models), "--ui-mcp-proxy", "--api-key", "k")
    with running_server(*args) as url:
        yield url


AUTH = {"Authorization": "Bearer k"}


def test_relays_get_with_only_the_named_headers(url, target):
    r = httpx.get(
        url + "/cors-proxy",
        params={"url": target + "/capture?x=1"},
        headers={
            **AUTH,
            "Cookie": "session=secret",
            "X-Api-Key": "k",
            "X-Llama-Server-Proxy-Header-Accept": "application/json",
            "x-llama-server-proxy-header-authorization": "Bearer for-the-target",
        },
    )
    assert r.status_code == 200 and r.json() == {"hello": "proxy"}
    assert r.headers["x-upstream"] == "yes" and "access-control-allow-origin" not in r.headers
    seen = _Target.seen
    assert seen["path"] == "/capture?x=1"
    headers = seen["headers"]
    assert isinstance(headers, dict)
    assert headers["accept"] == "application/json"
    assert headers["authorization"] == "Bearer for-the-target"
    assert "cookie" not in headers and "x-api-key" not in headers


def test_relays_post_bodies_and_statuses(url, target):
    r = httpx.post(
        url + "/cors-proxy", params={"url": target + "/rev"}, content=b"abc", headers=AUTH
    )
    assert r.status_code == 201 and r.content == b"cba"
    r = httpx.post(url + "/cors-proxy", params={"url": target + "/empty"}, json={}, headers=AUTH)
    assert r.status_code == 204 and r.content == b""


@pytest.mark.parametrize(
    ("target_url", "status"),
    [
        ("ftp://host/x", 400),
        ("http://", 400),
        ("http://u:p@host/", 400),
        ("http://127.0.0.1:1/", 502),
    ],
)
def test_bad_targets(url, target_url, status):
    r = httpx.get(url + "/cors-proxy", params={"url": target_url}, headers=AUTH)
    assert r.status_code == status, r.text
    assert r.json()["error"]["message"]


def test_needs_the_key_and_the_flag(url, server, target):
    assert httpx.get(url + "/cors-proxy", params={"url": target}).status_code == 401
    r = httpx.get(server + "/cors-proxy", params={"url": target})
    assert r.status_code == 403 and r.json()["error"]["type"] == "feature_disabled"
