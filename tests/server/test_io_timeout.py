"""``-to/--timeout``: a client that stops sending mid-request has its connection closed
after N seconds, as cpp-httplib's read timeout closes llama-server's; with a longer
timeout the same stalled connection stays open. A request being answered is no stall."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from helpers.servers import running_server

HEAD = b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def _closed_after(url: str, first: bytes, wait: float) -> bool:
    """Send ``first``, then nothing: whether the server closed within ``wait`` seconds."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(first)
        sock.settimeout(wait)
        try:
            return sock.recv(4096) == b""
        except TimeoutError:
            return False


@pytest.fixture(scope="module")
def servers(smollm_path: str):
    with (
        running_server("-m", smollm_path, "-c", "512", "-to", "1") as short,
        running_server("-m", smollm_path, "-c", "512", "-to", "30") as long,
    ):
        yield short, long


@pytest.mark.flag_effect("-to")
@pytest.mark.parametrize(
    "first",
    [HEAD, HEAD + b"Content-Length: 40\r\n\r\n" + b'{"prompt": "'],
    ids=["head", "body"],
)
def test_a_stalled_request_is_cut_after_the_timeout(servers, first: bytes) -> None:
    short, long = servers
    t0 = time.monotonic()
    assert _closed_after(short, first, 5.0)
    assert 0.8 < time.monotonic() - t0 < 4.0
    assert not _closed_after(long, first, 3.0)


@pytest.mark.flag_effect("-to")
def test_a_long_answer_is_no_stall(servers) -> None:
    """Generating for longer than the timeout: the client owes nothing, the answer comes."""
    short, _ = servers
    body = {"prompt": "Count to a hundred:", "n_predict": 300, "ignore_eos": True}
    t0 = time.monotonic()
    r = httpx.post(short + "/completion", json=body, timeout=120)
    assert r.status_code == 200 and r.json()["tokens_predicted"] == 300
    assert time.monotonic() - t0 > 1.0, "too fast to prove anything: raise n_predict"
