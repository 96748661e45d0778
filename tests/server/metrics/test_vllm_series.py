"""The series dashboards, autoscalers and the endpoint picker read, under vLLM's meanings:
a ``model_name`` label on every series pyllama adds (llama-server's own stay as its suite
reads them), the KV cache's size in the picker's blocks, finished requests by reason,
per-request token histograms and the inter-token latency (issue 49, item 3)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers.servers import running_server

MODEL = "tide-model"
N_CTX = 4096
# llama-server's own series (tools/server/server-task.cpp), which its test suite reads as
# unlabelled lines
LLAMA_SERVER = {
    "prompt_tokens",
    "prompt_tokens_cached",
    "prompt_seconds",
    "tokens_predicted",
    "tokens_predicted_seconds",
    "n_decode",
    "n_tokens_max",
    "spec_decode_num_draft_tokens",
    "spec_decode_num_accepted_tokens",
    "spec_decode_num_drafts",
    "prompt_tokens_seconds",
    "predicted_tokens_seconds",
    "requests_processing",
    "requests_deferred",
    "n_busy_slots_per_decode",
}


@pytest.fixture(scope="module")
def url(smollm_path: str) -> Iterator[str]:
    args = ["-m", smollm_path, "-t", "2", "-c", str(N_CTX), "-np", "2", "--metrics"]
    with running_server(*args, "--alias", MODEL) as url:
        yield url


def families(url: str) -> dict[str, object]:
    r = httpx.get(url + "/metrics", timeout=30)
    assert r.status_code == 200, r.text
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def value(fams: dict, name: str, sample: str | None = None, **labels: str) -> float:
    family = fams[name]
    found = [
        s.value
        for s in family.samples
        if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (name, sample, labels, family.samples)
    return found[0]


def test_labels(url):
    # a request first, so that every family has its samples
    body = {"prompt": "The tide", "n_predict": 2}
    assert httpx.post(url + "/completion", json=body, timeout=120).status_code == 200
    fams = families(url)
    assert "llamacpp:prompt_tokens" in fams  # the parser drops a counter's _total
    for name, family in fams.items():
        assert name.startswith("llamacpp:"), name
        for s in family.samples:
            if name.removeprefix("llamacpp:") in LLAMA_SERVER:
                assert s.labels == {}, s
            else:
                assert s.labels.get("model_name") == MODEL, s


def test_cache_config_info_gives_the_picker_the_kv_size_in_blocks(url):
    fams = families(url)
    [s] = fams["llamacpp:cache_config_info"].samples
    assert fams["llamacpp:cache_config_info"].type == "gauge"
    assert s.value == 1
    # GAIE v1.5.0's core-metrics-extractor reads these two labels; 16 tokens a block is
    # its prefix plugin's default, so the picker indexes N_CTX tokens for this pod
    assert s.labels == {
        "model_name": MODEL,
        "block_size": "16",
        "num_gpu_blocks": str(N_CTX // 16),
    }


def _stream(url: str, body: dict, leave_after: int | None = None) -> dict | None:
    """A streamed /completion; its last chunk, or None when it leaves after
    ``leave_after`` tokens (the client goes away)."""
    n = 0
    with httpx.stream("POST", url + "/completion", json={**body, "stream": True}, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            chunk = json.loads(line[6:])
            n += 1
            if leave_after is not None and n >= leave_after:
                return None
            if chunk.get("stop"):
                return chunk
    raise AssertionError("the stream ended without a last chunk")


def _wait_finished(url: str, before: float) -> dict:
    """/metrics once the e2e count passed ``before`` (a task's end reaches the server's
    loop after its response may have)."""
    import time

    t0 = time.monotonic()
    while True:
        fams = families(url)
        n = value(
            fams,
            "llamacpp:e2e_request_latency_seconds",
            "llamacpp:e2e_request_latency_seconds_count",
        )
        if n > before:
            return fams
        assert time.monotonic() - t0 < 60, "the finished task was never counted"
        time.sleep(0.05)


def test_finished_requests_by_reason_and_their_tokens(url):
    e2e = "llamacpp:e2e_request_latency_seconds"
    f0 = families(url)

    def success(fams: dict, reason: str) -> float:
        return value(
            fams,
            "llamacpp:request_success",
            "llamacpp:request_success_total",
            finished_reason=reason,
        )

    def hist(fams: dict, name: str) -> tuple[float, float]:
        full = "llamacpp:" + name
        return value(fams, full, full + "_sum"), value(fams, full, full + "_count")

    n = 12
    last = _stream(url, {"prompt": "The tide comes in and", "n_predict": n, "ignore_eos": True})
    assert last is not None and last["stop_type"] == "limit"
    f1 = _wait_finished(url, value(f0, e2e, e2e + "_count"))
    assert success(f1, "length") == success(f0, "length") + 1
    assert success(f1, "stop") == success(f0, "stop")
    gen_sum, gen_n = hist(f1, "request_generation_tokens")
    assert (gen_sum, gen_n) == (
        hist(f0, "request_generation_tokens")[0] + n,
        hist(f0, "request_generation_tokens")[1] + 1,
    )
    prompt_sum, prompt_n = hist(f1, "request_prompt_tokens")
    timings = last["timings"]
    n_prompt = timings["prompt_n"] + timings["cache_n"]
    assert (prompt_sum, prompt_n) == (
        hist(f0, "request_prompt_tokens")[0] + n_prompt,
        hist(f0, "request_prompt_tokens")[1] + 1,
    )
    # generation_tokens_total counts what llama-server's tokens_predicted_total counts
    gen_total = value(f1, "llamacpp:generation_tokens", "llamacpp:generation_tokens_total")
    assert gen_total == value(f1, "llamacpp:tokens_predicted", "llamacpp:tokens_predicted_total")
    # inter-token latency: one observation per token after those that came with the first,
    # together the time from the first token's arrival to the last's, which the request's
    # time per output token spans too (up to its final event)
    itl_sum, itl_n = hist(f1, "inter_token_latency_seconds")
    itl_sum -= hist(f0, "inter_token_latency_seconds")[0]
    itl_n -= hist(f0, "inter_token_latency_seconds")[1]
    tpot_sum = (
        hist(f1, "request_time_per_output_token_seconds")[0]
        - hist(f0, "request_time_per_output_token_seconds")[0]
    )
    assert 1 <= itl_n <= n - 1
    assert 0 < itl_sum <= tpot_sum * (n - 1) + 1e-6
    # vLLM's deprecated name is not served
    assert "llamacpp:time_per_output_token_seconds" not in f1

    # a client that goes away: an abort
    assert (
        _stream(url, {"prompt": "The tide", "n_predict": 400, "ignore_eos": True}, leave_after=2)
        is None
    )
    f2 = _wait_finished(url, value(f1, e2e, e2e + "_count"))
    assert success(f2, "abort") == success(f1, "abort") + 1
    assert success(f2, "length") == success(f1, "length")
    # no final event, no token counts
    assert hist(f2, "request_generation_tokens") == hist(f1, "request_generation_tokens")
