"""pyllama on Ray Serve, on a real two-node cluster: two replicas, one per node, serve the
whole REST surface through Serve's proxy to the OpenAI, Anthropic and Ollama clients; a
replica killed under load is replaced and loses nothing beyond the streams it was sending;
scaling down drains; the prefix router keeps a shared prompt on one replica."""

from __future__ import annotations

import gc
import json
import os
import signal
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from helpers.ray_cluster import replica_pids

SLOTS = 2
DEPLOYMENT = "pyllama-replica"


def _deploy(smollm_path: str, **args: object) -> None:
    from ray import serve

    from pyllama.serve.rayserve import build_app

    config = {
        "model": smollm_path,
        "replicas": 2,
        # one ingress: these tests are about the model replicas (routing, drain, scaling);
        # two ingresses are tests/serve/test_ray_ingress.py's
        "ingress_replicas": 1,
        "resources": {"slot": 1},
        "server_args": f"-c 4096 -np {SLOTS}",
        **args,
    }
    serve.run(build_app(config), name="default", route_prefix="/")


def _running(deployment: str = DEPLOYMENT) -> int:
    from ray import serve

    states = serve.status().applications["default"].deployments[deployment].replica_states
    return states.get("RUNNING", 0) if states else 0


def _wait_running(n: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while _running() != n or len(replica_pids(DEPLOYMENT)) != n:
        assert time.monotonic() < deadline, f"never {n} running replicas: {_running()}"
        time.sleep(0.5)


@pytest.fixture(autouse=True)
def _collect_client_sockets() -> Iterator[None]:
    """The SDK clients' connection pools drop sockets to the garbage collector under threads
    (seen with the OpenAI and Ollama clients); collect them after each test, so that their
    ResourceWarning does not fail whichever later test the collector happens to run in."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture(scope="module")
def app(serve_url: str, smollm_path: str) -> str:
    _deploy(smollm_path)
    _wait_running(2)  # and the processes of what ran before have drained and exited
    return serve_url


def _chat(url: str, text: str, **extra: object) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": 8, **extra}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)


def test_replicas_run_on_both_nodes(app: str):
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: _chat(app, f"Count to {i}."), range(16)))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert all(a.json()["choices"][0]["message"]["content"] for a in answers)
    assert len({a.headers["x-pyllama-replica"] for a in answers}) == 2
    assert len({a.headers["x-pyllama-node"] for a in answers}) == 2
    assert len(replica_pids(DEPLOYMENT)) == 2


def test_openai_anthropic_ollama_clients_through_the_proxy(app: str):
    import anthropic
    import ollama
    import openai

    served: Counter[str] = Counter()

    def note(response: httpx.Response) -> None:
        served[response.headers["x-pyllama-replica"]] += 1

    hooks = {"response": [note]}
    hi = [{"role": "user", "content": "Hi!"}]
    oa_http = httpx.Client(event_hooks=hooks)  # closed below: openai leaves a given one open
    oa = openai.OpenAI(base_url=f"{app}/v1", api_key="none", http_client=oa_http)
    claude = anthropic.Anthropic(base_url=app, api_key="none")  # its own HTTP client
    local = ollama.Client(host=app)

    def openai_chat(i: int) -> str:
        r = oa.chat.completions.create(model="any", messages=hi, max_tokens=8, seed=i)
        return r.choices[0].message.content

    def openai_stream(i: int) -> str:
        chunks = oa.chat.completions.create(model="any", messages=hi, max_tokens=8, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    def anthropic_messages(i: int) -> str:
        raw = claude.messages.with_raw_response.create(model="any", max_tokens=8, messages=hi)
        served[raw.headers["x-pyllama-replica"]] += 1
        return raw.parse().content[0].text

    def anthropic_stream(i: int) -> str:
        with claude.messages.stream(model="any", max_tokens=8, messages=hi) as s:
            return "".join(s.text_stream)

    def ollama_chat(i: int) -> str:
        return local.chat(model="any", messages=hi, options={"num_predict": 8}).message.content

    def ollama_generate(i: int) -> str:
        return local.generate(model="any", prompt="Hi!", options={"num_predict": 8}).response

    calls = [openai_chat, openai_stream, anthropic_messages, anthropic_stream, ollama_chat]
    calls += [ollama_generate]
    with ThreadPoolExecutor(6) as pool:
        texts = list(
            pool.map(lambda job: job[0](job[1]), [(c, i) for i in range(3) for c in calls])
        )
    gc.collect()  # a client that leaked a connection fails this test, not a later one
    assert len(texts) == 18 and all(t.strip() for t in texts), texts
    assert len(served) == 2, served  # both replicas answered these clients
    assert local.list().models  # and Ollama's model list, through the same proxy


def test_shared_prompt_stays_on_one_replica(app: str):
    """Two groups of chats, each group with its own long system prompt: every chat of a
    group goes to the replica that has its prompt cached, and finds it there."""
    groups = {
        name: f"You are the {name} assistant. " + " ".join(f"{name} rule {i}." for i in range(150))
        for name in ("harbour", "orchard")
    }
    seen: dict[str, set[str]] = {name: set() for name in groups}
    cached: list[int] = []
    for round_ in range(3):
        for name, system in groups.items():
            r = httpx.post(
                f"{app}/v1/chat/completions",
                json={
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": f"Question {round_} about {name}?"},
                    ],
                    "max_tokens": 4,
                },
                timeout=120,
            )
            assert r.status_code == 200, r.text
            seen[name].add(r.headers["x-pyllama-replica"])
            if round_:
                cached.append(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
    assert all(len(replicas) == 1 for replicas in seen.values()), seen
    assert min(cached) > 500, cached  # the system prompt came from the replica's cache


class _Load:
    """Clients sending streamed and whole chats in a loop, recording every outcome."""

    def __init__(self, url: str, clients: int) -> None:
        self.url = url
        self.stop = threading.Event()
        self.outcomes: list[tuple[str, str, str]] = []  # (kind, outcome, replica)
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(clients)]

    def _record(self, *outcome: str) -> None:
        with self._lock:
            self.outcomes.append(outcome)  # type: ignore[arg-type]

    def _stream(self, client: httpx.Client, i: int) -> None:
        body = {
            "messages": [{"role": "user", "content": f"Tell a story, number {i}."}],
            "max_tokens": 48,
            "stream": True,
        }
        with client.stream("POST", f"{self.url}/v1/chat/completions", json=body) as r:
            replica = r.headers.get("x-pyllama-replica", "")
            if r.status_code != 200:
                r.read()
                self._record("stream", f"status {r.status_code}: {r.text[:200]}", replica)
                return
            done = error = False
            for line in r.iter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: ") and "error" in json.loads(line[6:]):
                    error = True
            self._record("stream", "done" if done else "error event" if error else "cut", replica)

    def _whole(self, client: httpx.Client, i: int) -> None:
        r = client.post(
            f"{self.url}/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": f"Name a fruit, {i}."}],
                "max_tokens": 24,
            },
        )
        ok = r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
        self._record(
            "whole",
            "done" if ok else f"status {r.status_code}: {r.text[:200]}",
            r.headers.get("x-pyllama-replica", ""),
        )

    def _run(self, n: int) -> None:
        with httpx.Client(timeout=120) as client:
            i = 0
            while not self.stop.is_set():
                try:
                    (self._stream if (i + n) % 2 else self._whole)(client, i)
                except httpx.HTTPError as e:
                    self._record("either", f"transport {type(e).__name__}", "")
                i += 1

    def __enter__(self) -> _Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(timeout=180)


def test_killed_replica_is_replaced_and_only_its_streams_fail(app: str):
    pids = replica_pids(DEPLOYMENT)
    assert len(pids) == 2
    with _Load(app, clients=6) as load:
        while len(load.outcomes) < 12:
            time.sleep(0.1)
        before = {replica for _, _, replica in load.outcomes}
        os.kill(pids[0], signal.SIGKILL)
        killed_at = len(load.outcomes)
        time.sleep(5)
    _wait_running(2)
    new_pids = replica_pids(DEPLOYMENT)
    assert pids[0] not in new_pids and pids[1] in new_pids

    outcomes = Counter((kind, outcome) for kind, outcome, _ in load.outcomes)
    failed = {k: n for k, n in outcomes.items() if k[1] != "done"}
    # whole answers are retried on the other replica (nothing was sent yet); streams that
    # were under way on the killed replica end with an error event, at most its capacity
    assert set(failed) <= {("stream", "error event")}, outcomes
    assert sum(failed.values()) <= 4 * SLOTS, outcomes  # max_ongoing_requests
    assert len(load.outcomes) > killed_at + 6, "traffic went on on the other replica"

    with ThreadPoolExecutor(8) as pool:
        after = list(pool.map(lambda i: _chat(app, f"After {i}."), range(16)))
    assert all(a.status_code == 200 for a in after)
    replicas_after = {a.headers["x-pyllama-replica"] for a in after}
    assert len(replicas_after) == 2  # traffic resumes on both, one of them new
    assert replicas_after != before


def test_scale_down_drains_running_streams(app: str, smollm_path: str):
    """Two long streams, one per replica; the deployment scales to one replica meanwhile:
    both streams still end complete (Serve waits for the removed replica to drain, and for
    the ingress replicas the streams cross). Long enough (600 tokens) to outlast Serve's
    20 s default drain on a loaded machine, and to overlap on a quiet one."""
    _wait_running(2)
    results: list[tuple[str, int, str]] = []
    tokens = 600

    def long_stream(i: int) -> None:
        body = {
            "messages": [{"role": "user", "content": f"Write a long story {i}."}],
            "max_tokens": tokens,
            "ignore_eos": True,  # an early end of text is no drain
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        finish, n = "", 0
        with httpx.stream("POST", f"{app}/v1/chat/completions", json=body, timeout=300) as r:
            replica = r.headers["x-pyllama-replica"]
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    chunk = json.loads(line[6:])
                    for c in chunk.get("choices", []):
                        finish = c.get("finish_reason") or finish
                    if chunk.get("usage"):
                        n = chunk["usage"]["completion_tokens"]
        results.append((finish, n, replica))

    threads = [threading.Thread(target=long_stream, args=(i,)) for i in range(2)]
    threads[0].start()
    # the second stream may come through the other ingress replica: it sends it to the
    # other model replica once the replicas' reports (every second) show the first one
    time.sleep(4)
    threads[1].start()
    time.sleep(1.5)
    _deploy(smollm_path, replicas=1)
    for t in threads:
        t.join(timeout=900)
    assert len({replica for _, _, replica in results}) == 2, results  # one on each replica
    assert all(finish == "length" and n == tokens for finish, n, _ in results), results
    _wait_running(1)


def test_autoscaling_on_ongoing_requests(app: str, smollm_path: str):
    _deploy(
        smollm_path,
        replicas=1,
        min_replicas=1,
        max_replicas=2,
        target_ongoing_requests=1,
        upscale_delay_s=1,
        downscale_delay_s=4,
    )
    _wait_running(1)
    with _Load(app, clients=4) as load:
        deadline = time.monotonic() + 120
        while _running() < 2:
            assert time.monotonic() < deadline, "never scaled up under load"
            time.sleep(0.5)
    assert all(outcome == "done" for _, outcome, _ in load.outcomes), load.outcomes
    _wait_running(1, timeout=120)  # and back down once idle
