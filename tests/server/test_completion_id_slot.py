"""``/completion``'s ``id_slot`` is the slot that ran the task, as llama-server reports it
(pyllama echoed the request's, -1 when it named none): the engine's final event says which."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=120)
BODY = {"prompt": "The capital of France is", "n_predict": 4, "temperature": 0}


def _pair(smollm_path: str, n_parallel: str) -> Any:
    args = ["-m", smollm_path, "-c", "512", "-np", n_parallel, "-t", "2"]
    return running_server(*args), running_peer(*args)


@pytest.fixture(scope="module")
def one_slot(smollm_path: str) -> Iterator[tuple[str, str]]:
    ours, peer = _pair(smollm_path, "1")
    with ours as a, peer as b:
        yield a, b


@pytest.fixture(scope="module")
def two_slots(smollm_path: str) -> Iterator[tuple[str, str]]:
    ours, peer = _pair(smollm_path, "2")
    with ours as a, peer as b:
        yield a, b


def _answer(url: str, **fields: Any) -> dict[str, Any]:
    r = http.post(url + "/completion", json={**BODY, **fields})
    assert r.status_code == 200, r.text
    return r.json()


def _stream_slots(url: str) -> list[Any]:
    with http.stream("POST", url + "/completion", json={**BODY, "stream": True}) as r:
        lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    return [json.loads(line).get("id_slot") for line in lines if line != "[DONE]"]


def test_one_slot_reports_slot_0_as_llama_server(one_slot) -> None:
    ours, peer = (_answer(url) for url in one_slot)
    assert ours["id_slot"] == peer["id_slot"] == 0
    # a streamed token's chunk says -1 (llama-server fills the field in the final one only)
    ours_stream, peer_stream = (_stream_slots(url) for url in one_slot)
    assert ours_stream == peer_stream == [-1] * 4 + [0]


def test_the_named_slot_is_the_one_that_ran(two_slots) -> None:
    for slot in (1, 0):
        ours, peer = (_answer(url, id_slot=slot) for url in two_slots)
        assert ours["id_slot"] == peer["id_slot"] == slot


def test_an_unnamed_slot_is_the_one_that_ran(two_slots) -> None:
    ours, peer = (_answer(url) for url in two_slots)
    assert peer["id_slot"] in (0, 1) and ours["id_slot"] in (0, 1)
    # the copies of an n_cmpl request run side by side, each on its own slot
    copies = [_answer(url, n_cmpl=2) for url in two_slots]
    assert all(c["id_slot"] in (0, 1) for c in copies[1])
    assert sorted(c["id_slot"] for c in copies[0]) == [0, 1]
