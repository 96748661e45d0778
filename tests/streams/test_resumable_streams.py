"""Resumable streams against a real server: a streamed generation with X-Conversation-Id
outlives its client's disconnect and reads again, byte for byte, through GET /v1/stream;
DELETE stops it; lookup answers only the ids asked for; the errors are llama-server's."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

ASK = [{"role": "user", "content": "Write a long story about a cat."}]
LONG = {"messages": ASK, "temperature": 0, "ignore_eos": True, "stream": True}


@pytest.fixture(scope="module")
def server(smollm_path: str):
    with running_server("-m", smollm_path, "-c", "4096", "-np", "2", "-t", "2", "--metrics") as url:
        yield url


def _start(url: str, conv: str, max_tokens: int, keep: int = 300) -> bytes:
    """POST a streamed chat with the conversation id; read ``keep`` bytes and hang up."""
    got = b""
    body = {**LONG, "max_tokens": max_tokens}
    headers = {"X-Conversation-Id": conv}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for chunk in r.iter_raw():
            got += chunk
            if len(got) >= keep:
                break
    return got


def _lookup(url: str, ids: list[str]) -> list[dict]:
    r = httpx.post(url + "/v1/streams/lookup", json={"conversation_ids": ids})
    assert r.status_code == 200
    return r.json()


def _wait_done(url: str, conv: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        (entry,) = _lookup(url, [conv])
        if entry["is_done"]:
            return entry
        assert time.monotonic() < deadline, "the generation did not finish"
        time.sleep(0.2)


def _text(sse: bytes) -> str:
    out = []
    for line in sse.split(b"\n"):
        if line.startswith(b"data: {"):
            for c in orjson.loads(line[6:])["choices"]:
                out.append(c["delta"].get("content") or "")
    return "".join(out)


def test_a_stream_read_again_after_a_disconnect_gives_the_same_bytes(server: str) -> None:
    partial = _start(server, "conv-reread", 120)
    # a reader that joins while the generation may still run follows it to its end
    live = httpx.get(server + "/v1/stream", params={"conv_id": "conv-reread"}, timeout=120)
    entry = _wait_done(server, "conv-reread")
    full = httpx.get(server + "/v1/stream", params={"conv_id": "conv-reread"}).content
    assert live.status_code == 200 and live.content == full
    assert full.startswith(partial) and full.endswith(b"data: [DONE]\n\n")
    assert entry["total_bytes"] == len(full) and entry["completed_at"] >= entry["started_at"]
    rest = httpx.get(
        server + "/v1/stream", params={"conv_id": "conv-reread", "from": len(partial)}
    ).content
    assert partial + rest == full
    # the generation went on without its client: the whole greedy reply is there
    whole = httpx.post(
        server + "/v1/chat/completions", json={**LONG, "max_tokens": 120, "stream": False}
    ).json()
    assert _text(full) == whole["choices"][0]["message"]["content"]


def test_delete_stops_the_generation_and_drops_the_session(server: str) -> None:
    _start(server, "conv-stop", 3000)
    r = httpx.delete(server + "/v1/stream", params={"conv_id": "conv-stop"})
    assert r.status_code == 204 and not r.content
    assert _lookup(server, ["conv-stop"]) == []
    gone = httpx.get(server + "/v1/stream", params={"conv_id": "conv-stop"})
    assert gone.status_code == 404
    assert gone.json()["error"]["message"] == "Stream not found or expired"
    deadline = time.monotonic() + 30
    while any(s["is_processing"] for s in httpx.get(server + "/slots").json()):
        assert time.monotonic() < deadline, "the stopped generation still runs"
        time.sleep(0.1)
    predicted = _metric(server, "llamacpp:tokens_predicted_total")
    assert predicted < 3000  # stopped long before its max_tokens
    # DELETE is idempotent
    assert httpx.delete(server + "/v1/stream", params={"conv_id": "conv-stop"}).status_code == 204


def _metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_a_new_generation_replaces_the_conversations_previous_one(server: str) -> None:
    _start(server, "conv-again", 3000)
    first = _lookup(server, ["conv-again"])[0]["started_at"]
    body = {**LONG, "max_tokens": 8}
    with httpx.stream(
        "POST",
        server + "/v1/chat/completions",
        json=body,
        headers={"X-Conversation-Id": "conv-again"},
    ) as r:
        second = r.read()
    entry = _wait_done(server, "conv-again")
    assert entry["started_at"] >= first and entry["total_bytes"] == len(second)
    assert httpx.get(server + "/v1/stream", params={"conv_id": "conv-again"}).content == second


def test_lookup_answers_only_the_ids_asked_for(server: str) -> None:
    with httpx.stream(
        "POST",
        server + "/v1/chat/completions",
        json={**LONG, "max_tokens": 4},
        headers={"X-Conversation-Id": "mine::smol"},
    ) as r:
        r.read()
    assert [e["conversation_id"] for e in _lookup(server, ["mine"])] == ["mine::smol"]
    assert _lookup(server, ["min"]) == [] and _lookup(server, []) == []
    r = httpx.post(server + "/v1/streams/lookup", json={"conversation_ids": "mine"})
    assert r.status_code == 200 and r.json() == []
    # a whole (not streamed) reply keeps no session
    httpx.post(
        server + "/v1/chat/completions",
        json={**LONG, "max_tokens": 4, "stream": False},
        headers={"X-Conversation-Id": "whole"},
    )
    assert _lookup(server, ["whole"]) == []


def test_errors_match_llama_server(server: str, smollm_path: str) -> None:
    def ask(url: str) -> list[tuple[int, str]]:
        out = []
        for method, path in (("GET", "/v1/stream"), ("DELETE", "/v1/stream")):
            r = httpx.request(method, url + path)
            out.append((r.status_code, r.json()["error"]["message"]))
        r = httpx.post(url + "/v1/streams/lookup", content=b"{oops")
        out.append((r.status_code, r.json()["error"]["message"].split(":")[0]))
        return out

    with running_peer("-m", smollm_path, "-c", "1024", "-np", "1") as peer:
        assert ask(server) == ask(peer)
    r = httpx.get(server + "/v1/stream", params={"conv_id": "c", "from": "x"})
    assert r.status_code == 404  # no such session, before the offset is looked at
    _start(server, "conv-offset", 4)
    r = httpx.get(server + "/v1/stream", params={"conv_id": "conv-offset", "from": "x"})
    assert r.status_code == 400 and r.json()["error"]["message"] == "Invalid 'from' offset"
