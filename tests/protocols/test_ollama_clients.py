"""Ollama clients against a real pyllama-server (issue 38): one model-name rule on every
route (single-model mode answers any name, as llama-server does; router mode picks the
model by name and answers Ollama's 404 for one it does not know), LlamaIndex's Ollama LLM
(which reads /api/show before it chats), and load_duration after a reload."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest

from helpers.servers import running_server

http = httpx.Client(timeout=300.0)
SAY = [{"role": "user", "content": "Name three colors."}]
UNKNOWN = "no-such-model:13b"

# every route that takes a model name in its body, with a body it answers
NAMED_ROUTES = {
    "/api/chat": {"messages": SAY, "stream": False, "options": {"num_predict": 2}},
    "/api/generate": {"prompt": "Hi", "stream": False, "options": {"num_predict": 2}},
    "/api/show": {},
    "/v1/chat/completions": {"messages": SAY, "max_tokens": 2},
    "/v1/completions": {"prompt": "Hi", "max_tokens": 2},
    "/v1/messages": {"messages": SAY, "max_tokens": 2},
    "/v1/responses": {"input": "Hi", "max_output_tokens": 2},
    "/completion": {"prompt": "Hi", "n_predict": 2},
}


@pytest.mark.parametrize("path", sorted(NAMED_ROUTES))
def test_single_model_mode_answers_any_name(server: str, path: str) -> None:
    r = http.post(server + path, json={"model": UNKNOWN, **NAMED_ROUTES[path]})
    assert r.status_code == 200, r.text


def test_show_then_chat_with_the_ollama_package(server: str) -> None:
    """What Ollama front ends do: /api/show for the model's facts, then chat, streamed and
    not, all with a name the server never heard of."""
    with ollama.Client(host=server, timeout=300) as client:
        info = client.show(UNKNOWN)
        assert info.modelinfo["llama.context_length"] == 8192
        r = client.chat(model=UNKNOWN, messages=SAY, options={"temperature": 0, "num_predict": 8})
        assert r.model == UNKNOWN and r.message.content
        chunks = list(
            client.chat(
                model=UNKNOWN,
                messages=SAY,
                options={"temperature": 0, "num_predict": 8},
                stream=True,
            )
        )
        assert chunks[-1].done and "".join(c.message.content or "" for c in chunks) == (
            r.message.content
        )


@pytest.fixture(scope="module")
def small_slot_server(smollm_path: str) -> Iterator[str]:
    """A slot smaller than the model's trained context (8192): LlamaIndex asks for num_ctx
    equal to /api/show's context_length, and the request runs in the slot's context (as
    Ollama clamps a num_ctx it cannot give); pyllama used to refuse it (400)."""
    with running_server("-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1") as url:
        yield url


@pytest.mark.skipif(sys.version_info < (3, 10), reason="llama-index needs Python >= 3.10")
def test_llamaindex_complete_chat_and_stream(small_slot_server: str) -> None:
    from llama_index.llms.ollama import Ollama

    llm = Ollama(
        model=UNKNOWN,
        base_url=small_slot_server,
        request_timeout=300,
        temperature=0,
        additional_kwargs={"num_predict": 8},
    )
    try:
        _complete_chat_and_stream(llm)
    finally:
        llm.client.close()  # the LLM never closes the ollama client it made


def _complete_chat_and_stream(llm: Any) -> None:
    from llama_index.core.llms import ChatMessage

    done = llm.complete("Name three colors.")
    assert done.text
    assert llm.context_window == 8192  # read from /api/show, which answered this name
    streamed = list(llm.stream_complete("Name three colors."))
    assert streamed and streamed[-1].text == done.text
    reply = llm.chat([ChatMessage(role="user", content="Name three colors.")])
    assert reply.message.role == "assistant" and reply.message.content
    parts = list(llm.stream_chat([ChatMessage(role="user", content="Name three colors.")]))
    assert parts[-1].message.content == reply.message.content


# ----------------------------------------------------------------------------- router mode
@pytest.fixture(scope="module")
def router(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    d: Path = tmp_path_factory.mktemp("ollama-router")
    (d / "smol-a.gguf").symlink_to(smollm_path)
    with running_server("--models-dir", str(d), "-t", "2", "-c", "1024", "-np", "1") as url:
        yield url


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate", "/api/show", "/api/embed"])
def test_router_unknown_name_is_ollamas_404(router: str, path: str) -> None:
    body = {**NAMED_ROUTES.get(path, {"input": "x"}), "model": "nope"}
    r = http.post(router + path, json=body)
    assert r.status_code == 404
    assert r.json() == {"error": "model 'nope' not found"}


def test_router_other_protocols_keep_llama_servers_400(router: str) -> None:
    r = http.post(router + "/v1/chat/completions", json={"model": "nope", "messages": SAY})
    assert r.status_code == 400 and "model 'nope' not found" in r.text


def test_router_known_name_and_its_latest_tag(router: str) -> None:
    with ollama.Client(host=router, timeout=300) as client:
        show = client.show("smol-a")
        assert client.show("smol-a:latest").modelinfo == show.modelinfo
        r = client.chat(model="smol-a:latest", messages=SAY, options={"num_predict": 4})
        assert r.message.content and r.model == "smol-a:latest"
        with pytest.raises(ollama.ResponseError) as e:
            client.chat(model="nope", messages=SAY)
        assert e.value.status_code == 404 and e.value.error == "model 'nope' not found"


# ------------------------------------------------------------------------------ load time
@pytest.mark.flag_effect("--sleep-idle-seconds")
def test_load_duration_is_the_reload_this_request_waited_for(smollm_path: str) -> None:
    args = ("-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1", "--sleep-idle-seconds", "1")
    with running_server(*args) as url, ollama.Client(host=url, timeout=300) as client:
        deadline = time.monotonic() + 60
        while not http.get(url + "/props").json()["is_sleeping"]:
            assert time.monotonic() < deadline, "the server never went to sleep"
            time.sleep(0.2)
        t0 = time.perf_counter_ns()
        woke = client.chat(model="x", messages=SAY, options={"num_predict": 4})
        wall = time.perf_counter_ns() - t0
        # the reload is real work (the file mapped, the context and the engine built) and
        # happened inside this request
        assert 1_000_000 < woke.load_duration < wall
        assert woke.total_duration >= woke.load_duration + woke.eval_duration
        warm = client.chat(model="x", messages=SAY, options={"num_predict": 4})
        assert warm.load_duration < woke.load_duration / 10  # in memory already
