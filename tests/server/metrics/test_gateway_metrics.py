"""/metrics carries what gateways and autoscalers read, with vLLM's meanings, and the
values are true while requests run: scraped during a load of streamed chats on two slots,
they move and add up to what the clients saw (issue 37, item 4)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers.servers import running_server

N_PARALLEL = 2
N_CTX = 4096
MODEL = "sea-model"  # --alias: the model_name label of pyllama's series


class Scrape:
    """One parsed /metrics answer: samples by (name, labels) and each family's type."""

    def __init__(self, text: str) -> None:
        self.types: dict[str, str] = {}
        self.help: dict[str, str] = {}
        self.samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            self.help[family.name] = family.documentation
            for s in family.samples:
                self.samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def __getitem__(self, name: str) -> float:
        """The value of the one series of that name, whatever its labels."""
        [value] = [v for (n, _), v in self.samples.items() if n == name]
        return value

    def labelled(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(dict(labels), v) for (n, labels), v in self.samples.items() if n == name]

    def histogram(self, name: str) -> tuple[list[tuple[float, float]], float, float]:
        """(cumulative buckets as (le, count) in order, sum, count)."""
        assert self.types[name] == "histogram", name
        buckets = sorted((float(labels["le"]), v) for labels, v in self.labelled(name + "_bucket"))
        # one series, labelled with the model's name as vLLM labels its histograms
        [(sum_labels, total)] = self.labelled(name + "_sum")
        [(count_labels, count)] = self.labelled(name + "_count")
        assert set(sum_labels) == set(count_labels) == {"model_name"}, sum_labels
        return buckets, total, count


def scrape(url: str) -> Scrape:
    r = httpx.get(url + "/metrics", timeout=30)
    assert r.status_code == 200, r.text
    return Scrape(r.text)


HISTOGRAMS = (
    "llamacpp:time_to_first_token_seconds",
    "llamacpp:request_time_per_output_token_seconds",
    "llamacpp:e2e_request_latency_seconds",
    "llamacpp:request_queue_time_seconds",
)


def check_histograms(s: Scrape) -> None:
    for name in HISTOGRAMS:
        buckets, total, count = s.histogram(name)
        counts = [n for _, n in buckets]
        assert counts == sorted(counts), (name, buckets)  # cumulative: never decreasing
        assert buckets[-1] == (float("inf"), count), (name, buckets)
        # a request takes time: observations make the sum positive, none leave it 0
        # (a request that never waited in the queue adds 0 to the queue's sum)
        if count == 0 or name == "llamacpp:request_queue_time_seconds":
            assert total >= 0 if count else total == 0
        else:
            assert total > 0, (name, total, count)
        assert "vllm:" in s.help[name]


@pytest.fixture(scope="module")
def adapter(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from helpers.lora_adapter import write_lora

    path = tmp_path_factory.mktemp("lora") / "sea-style.gguf"
    return write_lora(smollm_path, path, rank=4, seed=0, a_type="q4_1")


@pytest.fixture(scope="module")
def two_slots(smollm_path: str, adapter: Path) -> Iterator[str]:
    """Two slots (a stream each: exact KV numbers), the adapter loaded but not applied by
    default, so only requests that name it use it."""
    args = ["-m", smollm_path, "-t", "2", "-c", str(N_CTX), "-np", str(N_PARALLEL)]
    args += ["--metrics", "--lora", str(adapter), "--lora-init-without-apply", "--alias", MODEL]
    with running_server(*args) as url:
        yield url


def test_the_new_names_are_exposed_with_vllm_equivalents(two_slots):
    s = scrape(two_slots)
    for name, kind in [
        ("llamacpp:num_requests_waiting", "gauge"),
        ("llamacpp:num_requests_running", "gauge"),
        ("llamacpp:kv_cache_usage_perc", "gauge"),
        ("llamacpp:lora_requests_info", "gauge"),
        ("llamacpp:prefix_cache_queries", "counter"),  # the parser drops a counter's _total
        ("llamacpp:prefix_cache_hits", "counter"),
        *((h, "histogram") for h in HISTOGRAMS),
    ]:
        assert s.types.get(name) == kind, name
        assert "vllm:" in s.help[name], name
    # llama-server's names stay
    for name in ("llamacpp:requests_processing", "llamacpp:requests_deferred"):
        assert s.types[name] == "gauge"
    assert s.types["llamacpp:kv_cache_usage_ratio"] == "gauge"
    check_histograms(s)


async def _chat(client: httpx.AsyncClient, url: str, i: int, n: int, **extra) -> dict:
    body = {
        "messages": [{"role": "user", "content": f"Request {i}: tell me about the sea."}],
        "max_tokens": n,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }
    t0 = time.perf_counter()
    first = None
    usage = None
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices", []):
                if first is None and choice["delta"].get("content"):
                    first = time.perf_counter()
    end = time.perf_counter()
    assert usage is not None and first is not None
    return {"e2e": end - t0, "ttft": first - t0, "n": usage["completion_tokens"]}


def _watch(url: str, stop: asyncio.Event, seen: list[Scrape]):
    async def run() -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            while not stop.is_set():
                r = await client.get(url + "/metrics")
                assert r.status_code == 200
                seen.append(Scrape(r.text))
                await asyncio.sleep(0.05)

    return run()


def test_values_under_load_move_and_add_up(two_slots):
    url = two_slots
    before = scrape(url)
    n_requests, n_tokens = 8, 24
    seen: list[Scrape] = []

    async def load() -> list[dict]:
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(_watch(url, stop, seen))
        async with httpx.AsyncClient(timeout=300) as client:
            results = await asyncio.gather(
                *[_chat(client, url, i, n_tokens) for i in range(n_requests)]
            )
        stop.set()
        await watcher
        return results

    clients = asyncio.run(load())
    after = scrape(url)
    assert len(seen) >= 5

    # requests waiting and running, as vLLM's gauges (and llama-server's, which agree)
    for s in seen:
        running = s["llamacpp:num_requests_running"]
        waiting = s["llamacpp:num_requests_waiting"]
        assert 0 <= running <= N_PARALLEL and 0 <= waiting <= n_requests
        assert running == s["llamacpp:requests_processing"]
        assert waiting == s["llamacpp:requests_deferred"]
        perc, ratio = s["llamacpp:kv_cache_usage_perc"], s["llamacpp:kv_cache_usage_ratio"]
        assert 0 <= perc <= ratio <= 1
        if running == 0:
            assert perc == 0
        check_histograms(s)
    assert any(
        s["llamacpp:num_requests_running"] == N_PARALLEL and s["llamacpp:num_requests_waiting"] > 0
        for s in seen
    ), [(s["llamacpp:num_requests_running"], s["llamacpp:num_requests_waiting"]) for s in seen]
    assert any(s["llamacpp:kv_cache_usage_perc"] > 0 for s in seen)

    # afterwards: nothing runs or waits; the requests' KV is free, the kept prompts remain
    assert after["llamacpp:num_requests_running"] == 0
    assert after["llamacpp:num_requests_waiting"] == 0
    assert after["llamacpp:kv_cache_usage_perc"] == 0
    slots = httpx.get(url + "/slots", timeout=30).json()
    kept = sum(s["n_cache_tokens"] for s in slots)
    assert kept > 0
    assert after["llamacpp:kv_cache_usage_ratio"] == pytest.approx(kept / N_CTX)

    # the histograms count every finished request once, and their sums match the clients'
    def delta(name: str) -> tuple[float, float]:
        _, s1, c1 = after.histogram(name)
        _, s0, c0 = before.histogram(name)
        return s1 - s0, c1 - c0

    check_histograms(after)
    e2e_sum, e2e_n = delta("llamacpp:e2e_request_latency_seconds")
    ttft_sum, ttft_n = delta("llamacpp:time_to_first_token_seconds")
    queue_sum, queue_n = delta("llamacpp:request_queue_time_seconds")
    tpot_sum, tpot_n = delta("llamacpp:request_time_per_output_token_seconds")
    assert e2e_n == ttft_n == queue_n == tpot_n == n_requests
    assert all(c["n"] == n_tokens for c in clients)

    client_e2e = sum(c["e2e"] for c in clients)
    client_ttft = sum(c["ttft"] for c in clients)
    # the server's clock starts after parsing and templating and stops before the last
    # bytes are written: a little less than the clients', never more
    assert client_e2e - 0.1 * n_requests - 0.1 * client_e2e <= e2e_sum <= client_e2e
    assert ttft_sum <= client_ttft
    assert ttft_sum >= client_ttft - 0.1 * n_requests - 0.2 * client_ttft
    client_tpot = sum((c["e2e"] - c["ttft"]) / (c["n"] - 1) for c in clients)
    assert tpot_sum == pytest.approx(client_tpot, rel=0.3, abs=0.01 * n_requests)
    # six of the eight waited for a slot, each at least as long as a request takes to run
    # (the shortest one a client saw, less its own queueing, bounds that from below)
    assert queue_sum <= ttft_sum + 0.01 * n_requests
    shortest_run = min(c["e2e"] for c in clients)
    assert queue_sum >= 0.5 * shortest_run * (n_requests - N_PARALLEL) / N_PARALLEL

    # no request named the adapter: none is listed, while running or after
    for s in [*seen, after]:
        [(labels, _)] = s.labelled("llamacpp:lora_requests_info")
        assert labels == {
            "model_name": MODEL,
            "max_lora": "1",
            "running_lora_adapters": "",
            "waiting_lora_adapters": "",
        }


def test_prefix_cache_hits_grow_when_a_prompt_comes_again(two_slots):
    url = two_slots
    prompt = f"Note {uuid.uuid4()}. " + "The tide comes in and the tide goes out. " * 60
    before = scrape(url)
    timings = []
    for _ in range(2):
        body = {"prompt": prompt, "n_predict": 1, "temperature": 0}
        r = httpx.post(url + "/completion", json=body, timeout=120)
        assert r.status_code == 200, r.text
        timings.append(r.json()["timings"])
    after = scrape(url)
    queries = after["llamacpp:prefix_cache_queries_total"]
    hits = after["llamacpp:prefix_cache_hits_total"]
    assert hits <= queries
    d_queries = queries - before["llamacpp:prefix_cache_queries_total"]
    d_hits = hits - before["llamacpp:prefix_cache_hits_total"]
    # every prompt token is a query; the hits are what the replies say came from a cache
    assert d_queries == sum(t["prompt_n"] + t["cache_n"] for t in timings)
    assert d_hits == sum(t["cache_n"] for t in timings)
    n_prompt = timings[0]["prompt_n"] + timings[0]["cache_n"]
    assert n_prompt > 500
    assert timings[1]["cache_n"] == n_prompt - 1  # all but the last, evaluated for its logits
    assert d_hits >= n_prompt - 1


def test_a_cancelled_request_counts_in_e2e_only(two_slots):
    """As vLLM counts aborted requests: a client that leaves ends its request, which counts
    in end-to-end latency (and time to first token, which it had), not in queue time or
    time per output token, which need the engine's final timings."""
    url = two_slots
    before = scrape(url)
    body = {"prompt": "Count:", "n_predict": 2000, "ignore_eos": True, "stream": True}
    t0 = time.perf_counter()
    with httpx.stream("POST", url + "/completion", json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                break  # the first token: leave
    left = time.perf_counter() - t0
    t1 = time.monotonic()
    while True:
        after = scrape(url)
        counts = {h: after.histogram(h)[2] - before.histogram(h)[2] for h in HISTOGRAMS}
        idle = after["llamacpp:num_requests_running"] == 0
        if (counts["llamacpp:e2e_request_latency_seconds"] and idle) or time.monotonic() - t1 > 10:
            break
        time.sleep(0.1)
    assert counts == {
        "llamacpp:time_to_first_token_seconds": 1,
        "llamacpp:request_time_per_output_token_seconds": 0,
        "llamacpp:e2e_request_latency_seconds": 1,
        "llamacpp:request_queue_time_seconds": 0,
    }
    e2e = after.histogram(HISTOGRAMS[2])[1] - before.histogram(HISTOGRAMS[2])[1]
    assert e2e < left + 10  # ended when the client left, not after 2000 tokens
    assert idle  # and its slot is free


def _lora_info(s: Scrape) -> tuple[dict[str, str], float]:
    [(labels, value)] = s.labelled("llamacpp:lora_requests_info")
    return labels, value


def test_lora_adapters_running_and_waiting(two_slots, adapter: Path):
    url = two_slots
    name = adapter.stem
    assert _lora_info(scrape(url))[0] == {
        "model_name": MODEL,
        "max_lora": "1",
        "running_lora_adapters": "",
        "waiting_lora_adapters": "",
    }
    seen: list[Scrape] = []

    async def load() -> list[dict]:
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(_watch(url, stop, seen))
        async with httpx.AsyncClient(timeout=300) as client:
            first = asyncio.ensure_future(_chat(client, url, 0, 64, lora=[{"id": 0, "scale": 1.0}]))
            # once it runs, a request with other scales waits: the engine switches the
            # applied adapters only when no slot is busy
            t0 = time.monotonic()
            while not any(_lora_info(s)[0]["running_lora_adapters"] for s in seen):
                assert time.monotonic() - t0 < 60, "the adapter was never listed as running"
                await asyncio.sleep(0.02)
            second = asyncio.ensure_future(_chat(client, url, 1, 8, lora=[{"id": 0, "scale": 0.5}]))
            results = [await first, await second]
        stop.set()
        await watcher
        return results

    asyncio.run(load())
    after = scrape(url)
    states = [_lora_info(s)[0] for s in seen]
    assert any(s["running_lora_adapters"] == name for s in states)
    assert any(
        s["running_lora_adapters"] == name and s["waiting_lora_adapters"] == name for s in states
    ), states
    for s in states:
        assert s["max_lora"] == "1"
        assert s["running_lora_adapters"] in ("", name)
        assert s["waiting_lora_adapters"] in ("", name)
    labels, value = _lora_info(after)
    assert labels == {
        "model_name": MODEL,
        "max_lora": "1",
        "running_lora_adapters": "",
        "waiting_lora_adapters": "",
    }
    assert abs(value - time.time()) < 60  # vLLM's value: the time of the scrape


def test_an_adapter_named_by_model_is_listed_as_running(two_slots, adapter: Path):
    """The picker's LoRA affinity reads running_lora_adapters and keys requests on their
    ``model``: a request that names the adapter as its model (vLLM's way) runs with it,
    one that names the base model does not."""
    url = two_slots
    models = httpx.get(url + "/v1/models", timeout=30).json()["data"]
    assert [m["id"] for m in models] == [MODEL, adapter.stem]
    assert models[1]["parent"] == MODEL and models[1]["root"] == str(adapter)
    for model, expected in ((MODEL, ""), (adapter.stem, adapter.stem)):
        seen: list[Scrape] = []

        async def load(model: str = model, seen: list[Scrape] = seen) -> dict:
            stop = asyncio.Event()
            watcher = asyncio.ensure_future(_watch(url, stop, seen))
            async with httpx.AsyncClient(timeout=300) as client:
                result = await _chat(client, url, 0, 48, model=model)
            stop.set()
            await watcher
            return result

        asyncio.run(load())
        running = {_lora_info(s)[0]["running_lora_adapters"] for s in seen}
        assert any(s["llamacpp:num_requests_running"] == 1 for s in seen)
        assert expected in running and running <= {"", expected}, running


def test_histograms_and_counters_survive_sleep(smollm_path):
    args = ["-m", smollm_path, "-t", "2", "-c", "2048", "-np", "1", "--metrics"]
    body = {"prompt": "The sea is", "n_predict": 4, "ignore_eos": True}
    with running_server(*args, "--sleep-idle-seconds", "1") as url:
        assert httpx.post(url + "/completion", json=body, timeout=60).status_code == 200
        awake = scrape(url)
        t0 = time.monotonic()
        while not httpx.get(url + "/props", timeout=30).json()["is_sleeping"]:
            assert time.monotonic() - t0 < 15, "the server did not go to sleep"
            time.sleep(0.1)
        asleep = scrape(url)
        for name in HISTOGRAMS:
            assert asleep.histogram(name) == awake.histogram(name)
        assert asleep["llamacpp:num_requests_running"] == 0
        assert asleep["llamacpp:kv_cache_usage_perc"] == 0
        for name in ("prefix_cache_queries_total", "prefix_cache_hits_total"):
            assert asleep["llamacpp:" + name] == awake["llamacpp:" + name]
        assert httpx.post(url + "/completion", json=body, timeout=60).status_code == 200
        woken = scrape(url)
        for name in HISTOGRAMS:
            assert woken.histogram(name)[2] == awake.histogram(name)[2] + 1
        q0 = awake["llamacpp:prefix_cache_queries_total"]
        assert woken["llamacpp:prefix_cache_queries_total"] > q0
        check_histograms(woken)
