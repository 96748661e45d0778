"""Resumable streams and the control route through the router: the POST that started a
conversation's stream names the child that owns it, and GET/DELETE /v1/stream and the
lookup go to that child."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from helpers.router import statuses
from helpers.servers import running_server

ASK = [{"role": "user", "content": "Write a long story about a cat."}]


@pytest.fixture(scope="module")
def router(smollm_path: str, tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("router-streams")
    (d / "smol-a.gguf").symlink_to(smollm_path)
    (d / "smol-b.gguf").symlink_to(smollm_path)
    with running_server("--models-dir", str(d), "-t", "2", "-c", "2048", "-np", "1") as url:
        yield url


def _stream(url: str, conv: str, max_tokens: int, keep: int) -> bytes:
    body = {"model": "smol-a", "messages": ASK, "temperature": 0, "ignore_eos": True}
    got = b""
    with httpx.stream(
        "POST",
        url + "/v1/chat/completions",
        json={**body, "max_tokens": max_tokens, "stream": True},
        headers={"X-Conversation-Id": conv},
        timeout=120,
    ) as r:
        assert r.status_code == 200
        for chunk in r.iter_raw():
            got += chunk
            if len(got) >= keep:
                break
    return got


def _lookup(url: str, ids: list[str]) -> list[dict]:
    return httpx.post(url + "/v1/streams/lookup", json={"conversation_ids": ids}).json()


def test_streams_resume_and_stop_through_the_router(router: str) -> None:
    partial = _stream(router, "r-conv", 60, 200)
    deadline = time.monotonic() + 120
    while not (found := _lookup(router, ["r-conv", "unknown"])) or not found[0]["is_done"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert [e["conversation_id"] for e in found] == ["r-conv"]
    full = httpx.get(router + "/v1/stream", params={"conv_id": "r-conv"}, timeout=60)
    assert full.status_code == 200 and full.content.startswith(partial)
    assert full.content.endswith(b"data: [DONE]\n\n")
    assert found[0]["total_bytes"] == len(full.content)
    rest = httpx.get(router + "/v1/stream", params={"conv_id": "r-conv", "from": len(partial)})
    assert partial + rest.content == full.content
    assert httpx.delete(router + "/v1/stream", params={"conv_id": "r-conv"}).status_code == 204
    assert _lookup(router, ["r-conv"]) == []
    r = httpx.get(router + "/v1/stream", params={"conv_id": "r-conv"})
    assert r.status_code == 404 and r.json()["error"]["message"] == "Stream not found or expired"
    r = httpx.get(router + "/v1/stream")
    assert (
        r.status_code == 400 and r.json()["error"]["message"] == "Missing conversation id in path"
    )


def test_control_is_proxied_to_the_model(router: str) -> None:
    r = httpx.post(
        router + "/v1/chat/completions/control",
        json={"model": "smol-a", "id": "chatcmpl-none", "action": "reasoning_end"},
        timeout=60,
    )
    assert r.status_code == 200
    assert r.json() == {"success": False, "message": "no active completion for this id"}


def test_a_stop_while_the_model_loads_cancels_the_request(router: str) -> None:
    body = {"model": "smol-b", "messages": ASK, "max_tokens": 4, "stream": True}
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            httpx.post,
            router + "/v1/chat/completions",
            json=body,
            headers={"X-Conversation-Id": "r-loading"},
            timeout=120,
        )
        deadline = time.monotonic() + 60
        while statuses(router).get("smol-b") != "loading":
            assert time.monotonic() < deadline and not pending.done()
            time.sleep(0.02)
        r = httpx.delete(router + "/v1/stream", params={"conv_id": "r-loading"})
        assert r.status_code == 204
        answer = pending.result()
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "request cancelled by a stop while the model was loading"
    )
