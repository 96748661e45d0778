"""llama-server's telemetry and chat details: prompt progress while a prompt is evaluated,
timings per token, /metrics counters and header, assistant prefill and
continue_final_message, __verbose, /chat/completions/input_tokens."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from helpers.servers import running_server

LONG = "the quick brown fox jumps over the lazy dog " * 12  # ~110 tokens: several batches


def sse_data(r: httpx.Response) -> list[dict]:
    return [
        json.loads(line[6:])
        for line in r.iter_lines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


@pytest.fixture(scope="module")
def small_batches(smollm_path):
    args = ["-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1", "-b", "32", "-ub", "32"]
    with running_server(*args, "--metrics") as url:
        yield url


def _stream(url: str, path: str, body: dict) -> list[dict]:
    with httpx.stream("POST", url + path, json={**body, "stream": True}, timeout=120) as r:
        assert r.status_code == 200
        return sse_data(r)


def _check_progress(progress: list[dict], cached: bool) -> None:
    first = progress[0]["prompt_progress"]
    assert first["cache"] == first["processed"]  # sent before any token is evaluated
    assert (first["cache"] > 0) == cached
    assert progress[0]["timings"]["prompt_n"] == 0 and progress[0]["timings"]["prompt_ms"] == 0
    last = progress[-1]["prompt_progress"]
    assert last["processed"] == last["total"] > 0
    steps = [p["prompt_progress"]["processed"] for p in progress]
    assert steps == sorted(set(steps))  # strictly increasing
    # one update up front, then one per batch of at most 32 tokens
    assert len(progress) == 1 + math.ceil((last["total"] - first["cache"]) / 32)
    ms = [p["timings"]["prompt_ms"] for p in progress]
    assert ms == sorted(ms) and ms[-1] > 0


def test_completion_prompt_progress(small_batches):
    body = {
        "prompt": LONG,
        "n_predict": 4,
        "return_progress": True,
        "cache_prompt": False,
        "timings_per_token": True,  # progress chunks carry timings only then, as llama-server's
    }
    chunks = _stream(small_batches, "/completion", body)
    progress = [c for c in chunks if "prompt_progress" in c]
    assert len(progress) > 2
    _check_progress(progress, cached=False)
    assert chunks.index(progress[-1]) < next(i for i, c in enumerate(chunks) if c["content"])


def test_chat_prompt_progress_reuses_cache(small_batches):
    body = {"messages": [{"role": "user", "content": LONG}], "max_tokens": 4}
    _stream(small_batches, "/v1/chat/completions", body)  # fills the slot's cache
    body["timings_per_token"] = True
    longer = {"messages": [{"role": "user", "content": LONG + "and again " * 20}]}
    chunks = _stream(
        small_batches, "/v1/chat/completions", {**body, **longer, "return_progress": True}
    )
    progress = [c for c in chunks if "prompt_progress" in c]
    _check_progress(progress, cached=True)


def test_timings_per_token_and_usage_timings(small_batches):
    body = {
        "messages": [{"role": "user", "content": "test"}],
        "max_tokens": 8,
        "timings_per_token": True,
        "stream_options": {"include_usage": True},
    }
    chunks = _stream(small_batches, "/v1/chat/completions", body)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert "timings" not in chunks[0]
    timed = [c["timings"]["predicted_n"] for c in chunks if c["choices"] and "timings" in c]
    assert timed and timed == sorted(timed) and timed[-1] <= 8
    usage = chunks[-1]
    assert (
        usage["choices"] == []
        and usage["timings"]["predicted_n"] == usage["usage"]["completion_tokens"]
    )


def test_metrics_counters_and_generation_rate(small_batches):
    prompt = "I believe the meaning of life is"
    one = httpx.post(
        small_batches + "/completion", json={"prompt": prompt, "n_predict": 1}, timeout=60
    ).json()["timings"]
    # the first token comes from the prompt's last batch: no decode step, no rate
    assert one["predicted_n"] == 1 and one["predicted_per_second"] == 0.0
    assert one["predicted_per_token_ms"] == 0.0
    # sampled (the server's default temperature): past an end-of-generation token, so 16
    more = httpx.post(
        small_batches + "/completion",
        json={"prompt": prompt, "n_predict": 16, "ignore_eos": True},
        timeout=60,
    ).json()["timings"]
    assert more["predicted_n"] == 16 and more["cache_n"] > 0
    assert more["predicted_per_second"] == pytest.approx(1e3 * 15 / more["predicted_ms"])
    r = httpx.get(small_batches + "/metrics", timeout=30)
    assert int(r.headers["Process-Start-Time-Unix"]) > 1_700_000_000
    values = {
        line.split()[0]: float(line.split()[1])
        for line in r.text.splitlines()
        if line.startswith("llamacpp:")
    }
    assert "# TYPE llamacpp:prompt_tokens_cached_total counter" in r.text
    assert values["llamacpp:prompt_tokens_cached_total"] >= more["cache_n"] > 0


def test_assistant_prefill_and_continue_final_message(server):
    msgs = [
        {"role": "user", "content": "What is the best book?"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Wh"}, {"type": "text", "text": "ill"}],
        },
    ]
    prompt = httpx.post(server + "/apply-template", json={"messages": msgs}, timeout=30).json()
    # the final assistant message is continued: its turn is left open
    assert prompt["prompt"].endswith("<|im_start|>assistant\nWh\n\nill")
    explicit = httpx.post(
        server + "/apply-template",
        json={
            "messages": [msgs[0], {"role": "assistant", "content": "Whill"}],
            "add_generation_prompt": False,
            "continue_final_message": True,
        },
        timeout=30,
    ).json()
    assert explicit["prompt"].endswith("<|im_start|>assistant\nWhill")
    for body in (
        {"messages": msgs, "add_generation_prompt": True, "continue_final_message": True},
        {"messages": [*msgs, {"role": "assistant", "content": "more"}]},
    ):
        r = httpx.post(server + "/v1/chat/completions", json={**body, "max_tokens": 2}, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["message"], body


def test_verbose_and_input_tokens(server):
    msgs = [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is best?"}]
    for verbose in (True, False):
        body = {"messages": msgs, "max_tokens": 2, "verbose": verbose}
        out = httpx.post(server + "/v1/chat/completions", json=body, timeout=60).json()
        assert ("__verbose" in out) == verbose
        if verbose:
            assert out["__verbose"]["prompt"].startswith("<|im_start|>system\nBook")
            assert out["__verbose"]["tokens_predicted"] == out["usage"]["completion_tokens"]
            n = out["usage"]["prompt_tokens"]
    r = httpx.post(server + "/chat/completions/input_tokens", json={"messages": msgs}, timeout=30)
    assert r.status_code == 200 and r.json() == {"input_tokens": n}
