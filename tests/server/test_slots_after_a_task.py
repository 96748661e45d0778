"""``GET /slots`` shows what llama-server's shows once a task has run on a slot: the slot's
tokens, its reset counters and next-token state after the task, and while one runs its
parameters and what is left of its limit. Compared with the peer started the same way."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=120)
# the chat parser's fields are the protocol's, which the ledger does not keep
PARSER = {"chat_format", "reasoning_format", "reasoning_in_content", "generation_prompt"}


@pytest.fixture(scope="module")
def servers(smollm_path: str) -> Iterator[tuple[str, str]]:
    args = ["-m", smollm_path, "-c", "512", "-np", "2", "-t", "2", "--slots"]
    with running_server(*args) as ours, running_peer(*args) as peer:
        yield ours, peer


def _slot(url: str, i: int) -> dict[str, Any]:
    return http.get(url + "/slots").json()[i]


def test_a_fresh_slot_shows_no_task_fields(servers) -> None:
    ours, peer = (_slot(url, 1) for url in servers)
    assert set(peer) == {"id", "n_ctx", "speculative", "is_processing"}
    assert not {"id_task", "n_prompt_tokens", "params", "next_token"} & set(ours)


def test_after_a_task_the_slot_shows_llama_servers_fields(servers) -> None:
    body = {"prompt": "The capital of France is", "n_predict": 8, "temperature": 0, "id_slot": 0}
    for url in servers:
        assert http.post(url + "/completion", json=body).status_code == 200
    ours, peer = (_slot(url, 0) for url in servers)
    assert set(peer) <= set(ours)
    for key in set(peer) - {"next_token", "params", "id_task"}:
        assert ours[key] == peer[key], key
    assert ours["id_task"] >= 0  # each server numbers its own tasks
    assert ours["n_prompt_tokens"] == peer["n_prompt_tokens"] > 8
    assert ours["n_prompt_tokens_processed"] == ours["n_prompt_tokens_cache"] == 0
    # the finished task's parameters, as the running one's (the chat parser's fields aside)
    assert set(peer["params"]) - set(ours["params"]) == PARSER
    for key, value in ours["params"].items():
        assert value == peer["params"][key], key
    assert ours["next_token"] == peer["next_token"]  # has_next_token false: it stopped


def _while_busy(url: str, n_predict: int) -> dict[str, Any]:
    """Slot 0 while a long request runs on it (after a few tokens)."""
    body = {
        "prompt": "Tell me a long story about",
        "n_predict": n_predict,
        "ignore_eos": True,
        "temperature": 0.5,
        "top_k": 7,
        "dry_multiplier": 0.5,
        "id_slot": 0,
    }
    runner = threading.Thread(target=lambda: http.post(url + "/completion", json=body))
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            slot = _slot(url, 0)
            token = slot.get("next_token", [{}])[0]
            if slot["is_processing"] and token.get("n_decoded", 0) >= 2:
                return slot
            time.sleep(0.02)
        raise AssertionError("the slot never showed a running task")
    finally:
        runner.join()


def test_a_running_task_shows_its_parameters_and_what_is_left(servers) -> None:
    ours, peer = (_while_busy(url, 160) for url in servers)
    assert ours["id_task"] >= 0 and ours["n_ctx"] == peer["n_ctx"]
    assert set(peer["params"]) - set(ours["params"]) == PARSER
    for key, value in ours["params"].items():
        assert value == peer["params"][key], key
    token = ours["next_token"][0]
    assert token["has_next_token"] is True
    assert token["n_remain"] == 160 - token["n_decoded"]
    # the prompt (evaluated + taken from the cache), then each token sampled. The peer's own
    # count is read between its sampling and its next batch, where it may trail by one
    prompt = peer["n_prompt_tokens_processed"] + peer["n_prompt_tokens_cache"]
    assert ours["n_prompt_tokens"] == prompt + token["n_decoded"]
    assert peer["n_prompt_tokens"] - peer["next_token"][0]["n_decoded"] in (prompt - 1, prompt)
    # the running task's prompt counts: evaluated and taken from the slot's cache
    for key in ("n_prompt_tokens_processed", "n_prompt_tokens_cache"):
        assert ours[key] == peer[key], key
    assert ours["n_prompt_tokens_processed"] > 0
    assert isinstance(token["has_new_line"], bool)
