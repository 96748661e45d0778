"""Router mode: one front server, a child pyllama-server per loaded model, requests routed
by their ``model`` field; loading, unloading, eviction past --models-max, presets."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

import httpx as http
import openai
import pytest

from helpers.router import statuses, wait_status
from helpers.servers import SERVER_PIDS, alive, running_server

KEY = "router-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def models_dir(smollm_path, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("router-models")
    (d / "smol-a.gguf").symlink_to(smollm_path)
    (d / "nested").mkdir()
    (d / "nested" / "weights.gguf").symlink_to(smollm_path)
    return d


@pytest.fixture(scope="module")
def router(models_dir):
    args = ["--models-dir", str(models_dir), "--models-max", "1", "-t", "2", "-c", "1024"]
    with running_server(*args, "-np", "1", "--api-key", KEY, "--metrics") as url:
        yield url


@pytest.mark.flag_effect("--models-dir", "--models-max", "--api-key")
def test_lists_models_and_serves_them_through_children(router):
    status = statuses(router)  # beside these, the models in pyllama's cache
    assert status["smol-a"] == status["nested"] == "unloaded"
    props = http.get(router + "/props", headers=AUTH).json()
    assert props["role"] == "router" and props["max_instances"] == 1
    client = openai.OpenAI(base_url=router + "/v1", api_key=KEY)
    msgs = [{"role": "user", "content": "Say hello."}]
    r = client.chat.completions.create(model="smol-a", messages=msgs, max_tokens=8)
    assert r.choices[0].message.content and r.model == "smol-a"
    assert statuses(router)["smol-a"] == "loaded"
    # streamed through the proxy chunk by chunk, same text as the whole reply (greedy)
    whole = client.chat.completions.create(
        model="smol-a", messages=msgs, max_tokens=8, temperature=0
    )
    parts = client.chat.completions.create(
        model="smol-a", messages=msgs, max_tokens=8, temperature=0, stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in parts if c.choices)
    assert text == whole.choices[0].message.content
    # the child's own endpoints, the model named in the query
    metrics = http.get(router + "/metrics", params={"model": "smol-a"}, headers=AUTH)
    assert "llamacpp:tokens_predicted_total" in metrics.text


@pytest.mark.flag_effect("--models-max")
def test_models_max_evicts_the_least_recently_used(router):
    http.post(
        router + "/completion",
        json={"model": "smol-a", "prompt": "a", "n_predict": 1},
        headers=AUTH,
    )
    r = http.post(
        router + "/completion",
        json={"model": "nested", "prompt": "Hi", "n_predict": 2},
        headers=AUTH,
        timeout=60,
    )
    assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
    status = statuses(router)
    assert (status["smol-a"], status["nested"]) == ("unloaded", "loaded")


def test_bad_requests(router):
    client = openai.OpenAI(base_url=router + "/v1", api_key=KEY)
    with pytest.raises(openai.BadRequestError, match="not found"):
        client.chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "x"}]
        )
    r = http.post(router + "/completion", json={"prompt": "x"}, headers=AUTH)
    assert r.status_code == 400 and "model name is missing" in r.json()["error"]["message"]
    r = http.post(router + "/completion", json={"model": "smol-a", "prompt": "x"})
    assert r.status_code == 401
    r = http.post(router + "/models/load", json={"model": "nope"}, headers=AUTH)
    assert r.status_code == 404


@pytest.mark.flag_effect("--no-models-autoload")
def test_no_autoload_load_and_unload(models_dir):
    args = ["--models-dir", str(models_dir), "--no-models-autoload", "-t", "2", "-c", "1024"]
    with running_server(*args, "-np", "1") as url:
        body = {"model": "smol-a", "prompt": "Hi", "n_predict": 2}
        r = http.post(url + "/completion", json=body)
        assert r.status_code == 400 and r.json()["error"]["message"] == "model is not loaded"
        # ?autoload=1 overrides the flag for one request
        assert http.post(url + "/completion?autoload=1", json=body, timeout=60).status_code == 200
        assert http.post(url + "/models/unload", json={"model": "smol-a"}).json()["success"]
        wait_status(url, "smol-a", "unloaded")
        assert http.post(url + "/models/load", json={"model": "smol-a"}).json()["success"]
        wait_status(url, "smol-a", "loaded")
        assert http.post(url + "/completion", json=body, timeout=60).status_code == 200
        r = http.post(url + "/models/load", json={"model": "smol-a"})
        assert r.status_code == 400 and "already running" in r.text


@pytest.mark.flag_effect("--models-preset")
def test_preset_sets_per_model_flags_and_reloads(smollm_path, tmp_path):
    ini = tmp_path / "models.ini"
    ini.write_text(
        f"[*]\nctx-size = 2048\n\n[short]\nmodel = {smollm_path}\nctx-size = 512\n\n"
        f"[long]\nmodel = {smollm_path}\nalias = big, longer\n\n[remote]\nhf-repo = someone/something\n"
    )
    with running_server("--models-preset", str(ini), "-t", "2", "-np", "1") as url:
        assert {"short", "long", "remote"} <= set(statuses(url))
        n_ctx = {}
        for name in ("short", "long"):
            props = http.get(url + "/props", params={"model": name}, timeout=60).json()
            n_ctx[name] = props["default_generation_settings"]["n_ctx"]
        assert n_ctx == {"short": 512, "long": 2048}
        # a preset alias names the model in requests and in the listing
        r = http.post(url + "/tokenize", json={"model": "longer", "content": "hi"}, timeout=60)
        assert r.status_code == 200 and r.json()["tokens"]
        listed = {m["id"]: m["aliases"] for m in http.get(url + "/models").json()["data"]}
        assert listed["long"] == ["big", "longer"]
        # a preset model without a local file fails to load, with the reason
        r = http.post(url + "/completion", json={"model": "remote", "prompt": "x"})
        assert r.status_code == 500 and "no local GGUF" in r.json()["error"]["message"]
        assert statuses(url)["remote"] == "failed"
        ini.write_text(f"[short]\nmodel = {smollm_path}\nctx-size = 512\n")
        ids = {m["id"] for m in http.get(url + "/models?reload=1").json()["data"]}
        assert "short" in ids and not ids & {"long", "remote"}


def test_a_client_that_leaves_cancels_the_childs_task(router):
    body = {"model": "nested", "prompt": "Count:", "n_predict": 2000, "ignore_eos": True}
    with http.stream(
        "POST", router + "/completion", json={**body, "stream": True}, headers=AUTH, timeout=60
    ) as r:
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
    t0 = time.monotonic()
    while True:
        slots = http.get(router + "/slots", params={"model": "nested"}, headers=AUTH).json()
        if not slots[0]["is_processing"]:
            break
        assert time.monotonic() - t0 < 10, "the child still generates for a client that left"
        time.sleep(0.1)


def test_a_request_waits_for_a_slot_instead_of_evicting_a_busy_model(router):
    """--models-max 1 and the one model mid-stream: a request for another model queues
    (no 503, no eviction), may give up while it waits, and is served once the stream ends."""
    body = {"model": "nested", "prompt": "Count:", "n_predict": 2000, "ignore_eos": True}
    other = {"model": "smol-a", "prompt": "Hi", "n_predict": 2}
    done: dict[str, http.Response] = {}
    with http.stream(
        "POST", router + "/completion", json={**body, "stream": True}, headers=AUTH, timeout=60
    ) as r:
        lines = r.iter_lines()  # kept: a dropped iterator closes the connection
        assert next(lines).startswith("data: ")
        with pytest.raises(http.ReadTimeout):
            http.post(router + "/completion", json=other, headers=AUTH, timeout=1)
        waiter = threading.Thread(
            target=lambda: done.update(
                r=http.post(router + "/completion", json=other, headers=AUTH, timeout=120)
            )
        )
        waiter.start()
        time.sleep(1)
        status = statuses(router)
        assert (status["nested"], status["smol-a"]) == ("loaded", "unloaded")
    waiter.join(120)  # the stream's end frees the slot
    assert done["r"].status_code == 200 and done["r"].json()["tokens_predicted"] == 2
    status = statuses(router)
    assert (status["nested"], status["smol-a"]) == ("unloaded", "loaded")


def _children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (a zombie counts as gone)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_router_killed_outright_leaves_no_child_behind(models_dir):
    """SIGKILL gives the router no chance to stop its children: they stop on their own."""
    args = ["--models-dir", str(models_dir), "-t", "2", "-c", "1024", "-np", "1"]
    child = 0
    try:
        with running_server(*args) as url:
            assert http.post(url + "/models/load", json={"model": "smol-a"}).json()["success"]
            wait_status(url, "smol-a", "loaded")
            router = SERVER_PIDS[url]
            children = _children(router)
            assert len(children) == 1
            child = children[0]
            assert b"pyllama.server" in Path(f"/proc/{child}/cmdline").read_bytes()
            os.kill(router, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while alive(child):
                assert time.monotonic() < deadline, "the child outlived its router"
                time.sleep(0.1)
    finally:
        if child and alive(child):  # the test failed: leave nothing running
            os.kill(child, signal.SIGKILL)


def test_sigterm_ends_open_model_event_streams(models_dir):
    """An open /models/sse stream never ends by itself: SIGTERM must not wait on it."""
    args = ["--models-dir", str(models_dir), "-t", "2", "-c", "1024", "-np", "1"]
    with running_server(*args) as url:
        router = SERVER_PIDS[url]
        opened = threading.Event()

        def listen() -> None:
            with http.Client(timeout=120) as client, client.stream("GET", url + "/models/sse") as r:
                opened.set()
                for _ in r.iter_lines():
                    pass

        reader = threading.Thread(target=listen, daemon=True)
        reader.start()
        assert opened.wait(30)
        t0 = time.monotonic()
        os.kill(router, signal.SIGTERM)
        reader.join(30)
        assert not reader.is_alive(), "the event stream stayed open after SIGTERM"
        while alive(router):
            assert time.monotonic() - t0 < 4, "the router waited for the open event stream"
            time.sleep(0.05)
