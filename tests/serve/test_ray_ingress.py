"""pyllama on Ray Serve, the ingress side, on a real two-node cluster: two ingress replicas
(one killed under load loses only what it carried), /metrics with every replica's series,
adapter scales and slot actions sent to every replica, a bound on waiting requests that
answers 503 in the OpenAI shape, and Serve's route prefix."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from helpers.ray_cluster import replica_pids

INGRESS = "pyllama"
REPLICA = "pyllama-replica"


def _deploy(smollm_path: str, server_args: str = "-c 4096 -np 2", **args: object) -> None:
    from ray import serve

    from pyllama.serve.rayserve import build_app

    route_prefix = str(args.pop("route_prefix", "/"))
    config = {
        "model": smollm_path,
        "replicas": 2,
        "resources": {"slot": 1},
        "server_args": server_args,
        **args,
    }
    serve.run(build_app(config), name="default", route_prefix=route_prefix)


@pytest.fixture(scope="module")
def adapter(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from helpers.lora_adapter import write_lora

    return write_lora(smollm_path, tmp_path_factory.mktemp("lora") / "a.gguf", a_type="q4_1")


@pytest.fixture(scope="module")
def app(serve_url: str, smollm_path: str, adapter: Path, tmp_path_factory) -> str:
    slots = tmp_path_factory.mktemp("slots")
    args = f"-c 4096 -np 2 --lora {adapter} --lora-init-without-apply --slot-save-path {slots}"
    _deploy(smollm_path, args, ingress_replicas=2)
    return serve_url


def _wait_processes(counts: dict[str, int], timeout: float = 300.0) -> None:
    """Until each deployment has exactly that many replica processes (those being replaced
    have drained and exited)."""
    deadline = time.monotonic() + timeout
    while (now := {d: len(replica_pids(d)) for d in counts}) != counts:
        assert time.monotonic() < deadline, now
        time.sleep(0.5)


def _chat(url: str, text: str, tokens: int = 8) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": tokens}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)


def test_metrics_carry_every_replica(app: str):
    for i in range(4):
        assert _chat(app, f"Hello {i}").status_code == 200
    r = httpx.get(f"{app}/metrics", timeout=60)
    assert r.status_code == 200, r.text
    replicas = r.headers["x-pyllama-replicas"].split(",")
    assert len(replicas) == 2
    lines = r.text.splitlines()
    for rid in replicas:  # every replica's own series, labelled
        assert any(ln.startswith(f'llamacpp:requests_processing{{replica="{rid}"') for ln in lines)
    # one exposition: each family's TYPE once
    types = [ln for ln in lines if ln.startswith("# TYPE llamacpp:requests_processing ")]
    assert len(types) == 1


def test_lora_scale_reaches_every_replica(app: str):
    r = httpx.post(f"{app}/lora-adapters", json=[{"id": 0, "scale": 0.5}], timeout=60)
    assert r.status_code == 200, r.text
    assert len(r.headers["x-pyllama-replicas"].split(",")) == 2
    seen: dict[str, float] = {}
    deadline = time.monotonic() + 60
    while len(seen) < 2:  # GETs land on either replica: read until both answered
        assert time.monotonic() < deadline, seen
        g = httpx.get(f"{app}/lora-adapters", timeout=60)
        seen[g.headers["x-pyllama-replica"]] = g.json()[0]["scale"]
    assert seen == dict.fromkeys(seen, 0.5), seen


def test_slot_action_reaches_every_replica(app: str):
    assert _chat(app, "Fill a slot.").status_code == 200
    r = httpx.post(f"{app}/slots/0?action=erase", timeout=60)
    assert r.status_code == 200, r.text
    assert len(r.headers["x-pyllama-replicas"].split(",")) == 2
    assert r.json()["id_slot"] == 0


def test_killed_ingress_loses_only_its_requests(app: str):
    deadline = time.monotonic() + 120
    while len(ingresses := replica_pids(INGRESS)) != 2:  # a loaded node starts them late
        assert time.monotonic() < deadline, ingresses
        time.sleep(0.5)
    outcomes: list[tuple[float, float, str, str]] = []  # (start, end, outcome, ingress)
    stop = threading.Event()
    lock = threading.Lock()

    def client(n: int) -> None:
        with httpx.Client(timeout=120) as c:
            i = 0
            while not stop.is_set():
                t0 = time.monotonic()
                body = {"messages": [{"role": "user", "content": f"Story {n}-{i}."}]}
                try:
                    r = c.post(f"{app}/v1/chat/completions", json={**body, "max_tokens": 24})
                    ok = r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
                    what = "done" if ok else f"status {r.status_code}"
                    via = r.headers.get("x-pyllama-ingress", "")
                except httpx.HTTPError as e:
                    what, via = f"transport {type(e).__name__}", ""
                with lock:
                    outcomes.append((t0, time.monotonic(), what, via))
                i += 1

    clients = 4
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while len({via for *_, via in outcomes if via}) < 2:  # both ingresses carried some
        assert time.monotonic() < deadline, Counter(o[2] for o in outcomes)
        time.sleep(0.2)
    os.kill(ingresses[0], signal.SIGKILL)
    killed_at = time.monotonic()
    time.sleep(10)
    stop.set()
    for t in threads:
        t.join(timeout=180)
    failed = [o for o in outcomes if o[2] != "done"]
    # only requests under way when it died: at most one a client, all begun before the kill
    assert len(failed) <= clients, failed
    assert all(start <= killed_at for start, *_ in failed), (killed_at, failed)
    after = [o for o in outcomes if o[0] > killed_at]
    assert len(after) >= clients and all(o[2] == "done" for o in after), after
    with ThreadPoolExecutor(4) as pool:
        again = list(pool.map(lambda i: _chat(app, f"After {i}."), range(8)))
    assert all(a.status_code == 200 for a in again)


def test_full_queue_is_a_503_in_the_openai_shape(serve_url: str, smollm_path: str):
    """One replica taking one request at a time, one ingress letting one more wait: of
    six long requests at once, those past the bound get a clear 503 at once. (Serve may
    refuse more than the bound when requests arrive together: it counts a request being
    assigned as queued.)"""
    _deploy(
        smollm_path,
        replicas=1,
        ingress_replicas=1,
        max_ongoing_requests=1,
        max_queued_requests=1,
    )
    # the previous deployment's replicas and ingresses gone (they drain), and the new path
    # answering, before the burst: else a burst that finds no replica yet is all refused
    _wait_processes({INGRESS: 1, REPLICA: 1})
    assert _chat(serve_url, "Ready?").status_code == 200
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda i: _chat(serve_url, f"Long {i}", 64), range(6)))
    codes = Counter(a.status_code for a in answers)
    assert codes[200] >= 1 and codes[503] >= 1 and set(codes) == {200, 503}, codes
    busy = next(a for a in answers if a.status_code == 503)
    err = busy.json()["error"]
    assert err["code"] == 503 and err["type"] == "unavailable_error" and err["message"]
    assert busy.headers["retry-after"] == "1"
    assert _chat(serve_url, "Again").status_code == 200  # the bound is on waiting, not on use


def test_route_prefix(serve_url: str, smollm_path: str):
    _deploy(smollm_path, replicas=1, ingress_replicas=1, route_prefix="/llm")
    assert httpx.get(f"{serve_url}/llm/health", timeout=60).status_code == 200
    r = _chat(f"{serve_url}/llm", "Hi")
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]
    assert httpx.get(f"{serve_url}/health", timeout=60).status_code == 404  # not served there
