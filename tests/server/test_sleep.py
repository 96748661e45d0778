"""--sleep-idle-seconds: the model is freed when idle and reloaded by the next request that
needs it; health, props, models and metrics answer while asleep without waking it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx as http
import pytest

from helpers.servers import SERVER_PIDS, running_server

KEY = {"Authorization": "Bearer k"}


def _sleeping(url: str) -> bool:
    r = http.get(url + "/props", headers=KEY)
    assert r.status_code == 200
    return r.json()["is_sleeping"]


def _wait_asleep(url: str, timeout: float = 15.0) -> None:
    t0 = time.monotonic()
    while not _sleeping(url):
        assert time.monotonic() - t0 < timeout, "the server did not go to sleep"
        time.sleep(0.1)


def _rss_mib(url: str) -> float:
    status = Path(f"/proc/{SERVER_PIDS[url]}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _metric(url: str, name: str) -> float:
    text = http.get(url + "/metrics", headers=KEY).text
    return float(next(x for x in text.splitlines() if x.startswith(f"llamacpp:{name} ")).split()[1])


@pytest.fixture(scope="module")
def sleepy(smollm_path):
    args = ["-m", smollm_path, "-t", "2", "-c", "4096", "-np", "2", "--metrics", "-a", "smol"]
    with running_server(*args, "--sleep-idle-seconds", "1", "--api-key", "k") as url:
        yield url


BODY = {"prompt": "The capital of France is", "n_predict": 12, "temperature": 0, "ignore_eos": True}


@pytest.mark.flag_effect("--sleep-idle-seconds", "--alias", "--api-key")
def test_sleep_frees_memory_and_a_request_wakes_it(sleepy):
    awake = http.post(sleepy + "/completion", json=BODY, headers=KEY, timeout=60).json()
    rss_awake = _rss_mib(sleepy)
    _wait_asleep(sleepy)
    assert _rss_mib(sleepy) < rss_awake - 40  # model weights and KV cache are gone
    # read-only routes answer from what is kept, and do not wake it
    assert http.get(sleepy + "/health").status_code == 200
    models = http.get(sleepy + "/v1/models").json()["data"]
    assert models[0]["id"] == "smol" and models[0]["meta"]["n_vocab"] == 49152
    props = http.get(sleepy + "/props", headers=KEY).json()
    assert props["is_sleeping"] and props["total_slots"] == 2 and props["eos_token"]
    assert _sleeping(sleepy)
    # neither an unknown path nor a request without the key loads the model
    assert http.post(sleepy + "/no-such-route", json={}, headers=KEY).status_code == 404
    assert http.post(sleepy + "/completion", json=BODY).status_code == 401
    assert _sleeping(sleepy)
    again = http.post(sleepy + "/completion", json=BODY, headers=KEY, timeout=60).json()
    assert not _sleeping(sleepy)
    assert again["content"] == awake["content"]  # the reloaded model is the same model


def test_running_generation_keeps_it_awake(sleepy):
    body = {"prompt": "Count:", "n_predict": 250, "ignore_eos": True, "temperature": 0}
    t0 = time.monotonic()
    r = http.post(sleepy + "/completion", json=body, headers=KEY, timeout=120)
    assert r.status_code == 200 and r.json()["tokens_predicted"] == 250
    assert time.monotonic() - t0 > 1.0  # longer than the idle limit
    assert not _sleeping(sleepy)  # it only starts counting once the request has ended


def test_a_resumable_stream_reads_while_asleep(sleepy):
    headers = {**KEY, "X-Conversation-Id": "nap"}
    body = {**BODY, "stream": True}
    with http.stream("POST", sleepy + "/completion", json=body, headers=headers) as r:
        whole = r.read()
    _wait_asleep(sleepy)
    again = http.get(sleepy + "/v1/stream", params={"conv_id": "nap"}, headers=KEY)
    assert again.status_code == 200 and again.content == whole
    found = http.post(
        sleepy + "/v1/streams/lookup", json={"conversation_ids": ["nap"]}, headers=KEY
    )
    assert found.json()[0]["is_done"]
    assert _sleeping(sleepy)  # the session lives beside the model: reading it wakes nothing


@pytest.mark.parametrize(
    "path,body",
    [
        ("/tokenize", {"content": "Hello"}),
        ("/v1/responses/input_tokens", {"input": "Hello world"}),
        ("/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "Hello"}]}),
    ],
)
def test_model_routes_wake_it(sleepy, path, body):
    _wait_asleep(sleepy)
    r = http.post(sleepy + path, json=body, headers=KEY, timeout=60)
    assert r.status_code == 200, r.text
    assert not _sleeping(sleepy)


@pytest.mark.flag_effect("--metrics")
def test_metrics_survive_sleep_and_rates_cover_the_last_window(sleepy):
    http.post(sleepy + "/completion", json=BODY, headers=KEY, timeout=60)
    predicted = _metric(sleepy, "tokens_predicted_total")
    assert predicted > 0
    http.post(sleepy + "/completion", json=BODY, headers=KEY, timeout=60)
    _wait_asleep(sleepy)
    # as llama-server's: the first scrape reports the generation since the previous
    # scrape, the next none
    assert _metric(sleepy, "predicted_tokens_seconds") > 0
    assert _metric(sleepy, "predicted_tokens_seconds") == 0
    assert _sleeping(sleepy)
    http.post(sleepy + "/completion", json=BODY, headers=KEY, timeout=60)
    # the counters go on from where the freed engine stopped
    assert _metric(sleepy, "tokens_predicted_total") == predicted + 2 * BODY["n_predict"]


def test_input_tokens_of_a_responses_request(sleepy):
    base = {"input": "Hello world"}
    r1 = http.post(sleepy + "/v1/responses/input_tokens", json=base, headers=KEY, timeout=60)
    with_instructions = {**base, "instructions": "Answer in French."}
    r2 = http.post(
        sleepy + "/responses/input_tokens", json=with_instructions, headers=KEY, timeout=60
    )
    assert r1.json()["object"] == "response.input_tokens"
    # the same prompt as the chat request it becomes
    user = {"role": "user", "content": "Hello world"}
    system = {"role": "system", "content": "Answer in French."}
    for r, messages in ((r1, [user]), (r2, [system, user])):
        chat = http.post(
            sleepy + "/chat/completions/input_tokens", json={"messages": messages}, headers=KEY
        )
        assert r.json()["input_tokens"] == chat.json()["input_tokens"] > 0
    bad = http.post(sleepy + "/v1/responses/input_tokens", json={"input": 3}, headers=KEY)
    assert bad.status_code == 400
