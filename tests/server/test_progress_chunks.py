"""Prompt progress chunks (``return_progress``) are llama-server's: the same keys with the same
kinds of values, the same steps, ``tokens: [0]`` in /completion's (pyllama sent ``[]``),
``timings`` only with ``timings_per_token`` (pyllama sent them always), progress on streamed
/v1/completions too (pyllama sent none), and none in an answer that is not streamed
(issue 38)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=180)
LONG = "the quick brown fox jumps over the lazy dog " * 6  # 55 tokens: two batches of 32
ARGS = ("-c", "1024", "-np", "1", "-b", "32", "-ub", "32", "-t", "2")
BASE = {"return_progress": True, "cache_prompt": False, "temperature": 0}


@pytest.fixture(scope="module")
def pair(smollm_path: str) -> Iterator[tuple[str, str]]:
    with (
        running_peer("-m", smollm_path, *ARGS) as peer,
        running_server("-m", smollm_path, *ARGS) as ours,
    ):
        yield peer, ours


def _chunks(url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with http.stream("POST", url + path, json=body) as r:
        assert r.status_code == 200, r.read()
        lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


def _shape(value: Any) -> Any:
    """``value`` with every scalar replaced by its kind (the keys kept)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def _progress(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in chunks if "prompt_progress" in c]


def _steps(chunks: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    return [
        (p["total"], p["cache"], p["processed"])
        for p in (c["prompt_progress"] for c in _progress(chunks))
    ]


@pytest.mark.parametrize("per_token", [False, True], ids=["plain", "timings_per_token"])
def test_completion_progress_chunks_are_the_peers(pair, per_token: bool) -> None:
    body = {**BASE, "prompt": LONG, "n_predict": 2, "stream": True}
    if per_token:
        body["timings_per_token"] = True
    peer, ours = (_chunks(url, "/completion", body) for url in pair)
    assert _steps(ours) == _steps(peer) == [(55, 0, 0), (55, 0, 32), (55, 0, 55)]
    for mine, theirs in zip(_progress(ours), _progress(peer)):
        assert _shape(mine) == _shape(theirs)
        assert mine["tokens"] == theirs["tokens"] == [0]
        same = ("index", "content", "stop", "id_slot", "tokens_predicted", "tokens_evaluated")
        assert {k: mine[k] for k in same} == {k: theirs[k] for k in same}
        assert ("timings" in mine) == per_token
    # a token's chunk names its token, return_tokens or not, as llama-server's
    first = next(c for c in ours if "prompt_progress" not in c)
    assert first["tokens"] == next(c for c in peer if "prompt_progress" not in c)["tokens"]
    assert len(first["tokens"]) == 1


def test_no_progress_in_an_answer_not_streamed(pair) -> None:
    body = {**BASE, "prompt": LONG, "n_predict": 2}
    peer, ours = (http.post(url + "/completion", json=body).json() for url in pair)
    assert "prompt_progress" not in peer and "prompt_progress" not in ours
    assert ours["tokens"] == peer["tokens"] == []


def test_oai_completion_progress_chunks_are_the_peers(pair) -> None:
    body = {**BASE, "prompt": LONG, "max_tokens": 2, "stream": True}
    peer, ours = (_chunks(url, "/v1/completions", body) for url in pair)
    assert _steps(ours) == _steps(peer) == [(55, 0, 0), (55, 0, 32), (55, 0, 55)]
    for mine, theirs in zip(_progress(ours), _progress(peer)):
        assert _shape(mine) == _shape(theirs)
        assert mine["choices"] == theirs["choices"]


def test_chat_progress_chunks_are_the_peers(pair) -> None:
    body = {**BASE, "messages": [{"role": "user", "content": LONG}], "max_tokens": 2}
    peer, ours = (_chunks(url, "/v1/chat/completions", {**body, "stream": True}) for url in pair)
    assert _steps(ours) == _steps(peer) and len(_steps(ours)) == 4
    for mine, theirs in zip(_progress(ours), _progress(peer)):
        # pyllama's chat chunks carry OpenAI's "logprobs": null, llama-server's leave it out
        for choice in mine["choices"]:
            assert choice.pop("logprobs") is None
        assert _shape(mine) == _shape(theirs)
        assert mine["choices"] == theirs["choices"]
