"""RELIABILITY.md items about limits, streaming and faults, each against a real
pyllama-server process with the real model."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from helpers.servers import (
    PYLLAMA_SERVER,
    SERVER_PIDS,
    running_server,
    start_process,
    wait_healthy,
)

http = httpx.Client(timeout=120.0)


@pytest.fixture(scope="module")
def small(smollm_path):
    """One slot, a 256-token context and a 2 KiB body limit."""
    with running_server(
        "-m", smollm_path, "-t", "2", "-c", "256", "-np", "1", "--max-body-bytes", "2048"
    ) as url:
        yield url


def test_streamed_body_over_the_limit(small):  # item 3
    def chunks():
        for _ in range(64):
            yield b'{"prompt": "' + b"x" * 100  # no Content-Length: chunked transfer

    r = http.post(
        small + "/completion", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413
    assert r.json()["error"]["code"] == 413


def test_oversized_headers_are_refused(small):  # item 4
    try:
        r = http.get(small + "/health", headers={"X-Big": "a" * 200_000})
        assert r.status_code in (400, 413, 431)
    except httpx.RemoteProtocolError:
        pass  # the connection was closed on it: also a refusal
    assert http.get(small + "/health").status_code == 200


def test_huge_max_tokens_stops_at_the_context(small):  # item 13
    r = http.post(
        small + "/v1/completions",
        json={
            "prompt": "Count: 1, 2, 3,",
            "max_tokens": 1_000_000,
            "temperature": 0,
            "ignore_eos": True,
        },
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"] <= 256


def test_special_token_text_in_a_message_is_text(server):  # item 16
    msgs = [{"role": "user", "content": "<|im_end|>"}]
    r = http.post(server + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 1})
    used = r.json()["usage"]["prompt_tokens"]
    prompt = http.post(server + "/apply-template", json={"messages": msgs}).json()["prompt"]
    parsed = len(http.post(server + "/tokenize", json={"content": prompt}).json()["tokens"])
    as_text = http.post(
        server + "/tokenize", json={"content": "<|im_end|>", "parse_special": False}
    )
    # the user's "<|im_end|>" counts as its text tokens, not as the one control token
    assert used == parsed - 1 + len(as_text.json()["tokens"])


def test_many_schemas_keep_memory_bounded(server):  # item 15
    def rss_kib() -> int:
        status = Path(f"/proc/{SERVER_PIDS[server]}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0])

    before = rss_kib()
    for i in range(40):
        schema = {
            "type": "object",
            "properties": {f"k{i}": {"type": "integer"}},
            "required": [f"k{i}"],
        }
        r = http.post(
            server + "/completion", json={"prompt": "{", "n_predict": 2, "json_schema": schema}
        )
        assert r.status_code == 200
    assert rss_kib() - before < 64 * 1024  # KiB: nothing per schema is kept


def test_split_emoji_streams_valid_utf8(server):  # item 22
    """A grammar forces emoji whose bytes span several tokens: each chunk is whole UTF-8."""
    body = {"prompt": "x", "n_predict": 32, "grammar": 'root ::= "😀🎉 ok"', "stream": True}
    pieces = []
    with http.stream("POST", server + "/completion", json=body) as r:
        for line in r.iter_lines():  # iter_lines decodes UTF-8 strictly: a split byte would raise
            if line.startswith("data: "):
                pieces.append(json.loads(line[6:])["content"])
    assert "".join(pieces) == "😀🎉 ok"
    assert all("\ufffd" not in p for p in pieces)


def test_abandoned_clients_then_a_fresh_request(server):  # item 24
    async def give_up(client: httpx.AsyncClient) -> None:
        with contextlib.suppress(httpx.HTTPError):
            await client.post(
                server + "/completion",
                json={"prompt": "Tell me a story.", "n_predict": 64, "stream": True},
                timeout=0.5,
            )

    async def crowd() -> None:
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=200)) as client:
            await asyncio.gather(*[give_up(client) for _ in range(200)])

    asyncio.run(crowd())
    t0 = time.monotonic()
    r = http.post(server + "/completion", json={"prompt": "Hi", "n_predict": 8}, timeout=60)
    assert r.status_code == 200 and r.json()["tokens_predicted"] > 0
    assert time.monotonic() - t0 < 30
    deadline = time.monotonic() + 15
    while any(s["is_processing"] for s in http.get(server + "/slots").json()):
        assert time.monotonic() < deadline, "abandoned tasks still hold slots"
        time.sleep(0.2)


def test_health_and_metrics_answer_during_a_long_prompt(server):  # item 33
    long_prompt = "The quick brown fox jumps over the lazy dog. " * 150  # ~1500 tokens
    t = threading.Thread(
        target=lambda: http.post(
            server + "/completion",
            json={"prompt": long_prompt, "n_predict": 1, "cache_prompt": False},
        )
    )
    t.start()
    time.sleep(0.3)
    for path in ("/health", "/metrics"):
        t0 = time.monotonic()
        r = http.get(server + path, timeout=5)
        assert r.status_code == 200 and time.monotonic() - t0 < 1.0
    t.join()


def _chat_lines(url: str, prompt: str, n: int) -> list[str]:
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": n,
        "ignore_eos": True,
        "stream": True,
    }
    with http.stream("POST", url + "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        return [line for line in r.iter_lines() if line]


def test_a_full_kv_cache_stops_one_request_only(smollm_path):  # items 25 and 26
    # two slots share one 256-cell cache: together they fill it long before either slot
    # reaches its own 256-token limit
    args = ("-m", smollm_path, "-t", "2", "-c", "256", "-np", "2", "--kv-unified")
    with running_server(*args) as url, concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda i: _chat_lines(url, f"Story {i}, please.", 240), (1, 2)))
        failed = [lines for lines in runs if any('"error"' in line for line in lines)]
        assert len(failed) == 1, "exactly one request gives up its room"
        error = json.loads(failed[0][-2].removeprefix("data: "))["error"]
        assert error["code"] == 500 and "Context size has been exceeded" in error["message"]
        assert [lines[-1] for lines in runs] == ["data: [DONE]"] * 2  # both streams end
        survivor = next(lines for lines in runs if lines is not failed[0])
        assert any('"finish_reason":"length"' in line for line in survivor)
        slots = http.get(url + "/slots").json()
        assert [s["is_processing"] for s in slots] == [False, False]
        # the survivor's prompt stays cached in its idle slot; a long request on the other
        # slot gets that room back instead of failing
        other = min(slots, key=lambda s: s["n_cache_tokens"])["id"]
        body = {"prompt": "Once upon a time", "n_predict": 200, "ignore_eos": True}
        r = http.post(url + "/completion", json={**body, "id_slot": other})
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 200


def test_sigterm_while_streaming_exits_cleanly(smollm_path):  # item 27
    proc, url = start_process([*PYLLAMA_SERVER, "-m", smollm_path, "-t", "2", "-c", "1024"])
    try:
        wait_healthy(url, proc)
        got = []
        body = {"prompt": "Once upon a time", "n_predict": 400, "ignore_eos": True, "stream": True}
        try:
            with httpx.stream("POST", url + "/completion", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        got.append(json.loads(line[6:]))
                        if len(got) == 3:
                            os.kill(proc.pid, signal.SIGTERM)
        except httpx.RemoteProtocolError:
            pass  # the stream was cut at a chunk boundary: every chunk read was whole
        assert len(got) >= 3
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
