"""The model's name where llama-server shows it (/props ``model_alias``, /v1/models ``id`` and
``aliases``, /models ``name``, the ``model`` of answers): without ``--alias`` llama-server names
the model by the path given to ``-m`` (pyllama showed the file name); with one, by the first
alias in sorted order (issue 38)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=120)
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}


def _names(url: str) -> dict[str, Any]:
    models = http.get(url + "/v1/models").json()
    answers = {
        path: http.post(url + path, json=body).json()["model"]
        for path, body in (
            ("/v1/chat/completions", CHAT),
            ("/v1/chat/completions", {**CHAT, "model": "another"}),  # the request's is not echoed
            ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
            ("/v1/messages", {**CHAT, "model": "another"}),
            ("/v1/responses", {"input": "hi", "max_output_tokens": 2}),
        )
    }
    return {
        "model_alias": http.get(url + "/props").json()["model_alias"],
        "id": [m["id"] for m in models["data"]],
        "aliases": [m["aliases"] for m in models["data"]],
        "name": [(m["name"], m["model"]) for m in models["models"]],
        **answers,
    }


def _both(*args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    with running_peer(*args) as url:
        peer = _names(url)
    with running_server(*args) as url:
        return peer, _names(url)


def test_without_alias_the_model_is_named_by_its_path(smollm_path: str) -> None:
    peer, ours = _both("-m", smollm_path, "-c", "512", "-t", "2")
    assert ours == peer
    assert ours["model_alias"] == smollm_path  # the path as given, not its file name
    assert ours["aliases"] == [[smollm_path]]


@pytest.mark.flag_effect("--alias")
def test_an_alias_names_the_model_as_llama_server(smollm_path: str) -> None:
    peer, ours = _both("-m", smollm_path, "-c", "512", "-t", "2", "--alias", "tiny,code")
    assert ours == peer
    assert ours["model_alias"] == "code" and ours["aliases"] == [["code", "tiny"]]
