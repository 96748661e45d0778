"""Reasoning text equals llama-server's, whole and streamed, for every --reasoning-format:
the reasoning verbatim between the tags (with the prompt's "\\n" after an opened
``<think>``), the content verbatim after ``</think>``, and ``none`` keeping the prompt's tag."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server
from helpers.thinking import THINKING_TEMPLATE, THOUGHT

ASK = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def servers(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    tpl: Path = tmp_path_factory.mktemp("tpl") / "thinking.jinja"
    tpl.write_text(THINKING_TEMPLATE)
    args = (
        "-m",
        smollm_path,
        "-c",
        "2048",
        "-np",
        "1",
        "--jinja",
        "--chat-template-file",
        str(tpl),
    )
    with running_server(*args) as ours, running_peer(*args) as peer:
        yield [ours, peer]


def _whole(url: str, body: dict) -> tuple[str | None, str | None]:
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    m = r.json()["choices"][0]["message"]
    return m.get("reasoning_content"), m.get("content")


def _streamed(url: str, body: dict) -> tuple[str, str]:
    text = {"reasoning_content": "", "content": ""}
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60
    ) as r:
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            for choice in json.loads(line[6:])["choices"]:
                for k in text:
                    text[k] += choice["delta"].get(k) or ""
    return text["reasoning_content"], text["content"]


@pytest.mark.parametrize("fmt", [None, "auto", "deepseek", "deepseek-legacy", "none"])
def test_reasoning_text_as_llama_server(servers: list[str], fmt: str | None) -> None:
    body: dict = {"messages": ASK, "grammar": THOUGHT, "temperature": 0, "max_tokens": 40}
    if fmt is not None:
        body["reasoning_format"] = fmt
    ours, peer = ((_whole(u, body), _streamed(u, body)) for u in servers)
    assert ours == peer
    (reasoning, content), _ = ours
    if fmt == "none":
        assert (
            reasoning is None and content == "<think>\nPlan: be brief.\n</think>\n\nParis is sunny."
        )
    else:
        assert (reasoning, content) == ("\nPlan: be brief.\n", "\n\nParis is sunny.")


def test_responses_reasoning_as_llama_server(servers: list[str]) -> None:
    body = {"model": "x", "input": "Weather in Paris?", "max_output_tokens": 40, "grammar": THOUGHT}
    outputs = []
    for url in servers:
        r = httpx.post(url + "/v1/responses", json=body, timeout=60)
        assert r.status_code == 200, r.text
        outputs.append(
            [(o["type"], [c["text"] for c in o.get("content") or []]) for o in r.json()["output"]]
        )
    assert outputs[0] == outputs[1]
