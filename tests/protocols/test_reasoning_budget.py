"""llama-server's reasoning budget and reasoning control: ``--reasoning-budget`` and the
request's ``reasoning_budget_tokens``/``thinking_budget_tokens``/``reasoning_budget_message``
(chat: the template's thinking tags; /completion: the request's own), Anthropic's
``thinking.budget_tokens``, and ``POST /v1/chat/completions/control`` ending a running
thinking block. The generated tokens equal llama-server's started the same way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server
from helpers.thinking import THINKING_TEMPLATE

ASK = [{"role": "user", "content": "What is 2+2?"}]
PROMPT = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"


@pytest.fixture(scope="module")
def args(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    tpl = tmp_path_factory.mktemp("budget") / "thinking.jinja"
    tpl.write_text(THINKING_TEMPLATE)
    return ["-m", smollm_path, "-c", "2048", "-np", "2", "-t", "2", "--chat-template-file",
            str(tpl), "--reasoning-budget", "5", "--reasoning-budget-message", " OK."]  # fmt: skip


@pytest.fixture(scope="module")
def servers(args: list[str]) -> Iterator[tuple[str, str]]:
    with running_server(*args) as ours, running_peer(*args) as peer:
        yield ours, peer


def _chat(url: str, **extra: object) -> dict:
    body = {"messages": ASK, "max_tokens": 40, "temperature": 0, **extra}
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=60).json()


@pytest.mark.parametrize(
    ("extra", "cut"),
    [
        pytest.param(  # the server's budget (5) and message; its template thinks
            {},
            "OK.",
            marks=pytest.mark.flag_effect(
                "--reasoning-budget", "--reasoning-budget-message", "--chat-template-file"
            ),
        ),
        ({"reasoning_budget_tokens": -1}, "OK."),  # -1: the server's
        ({"thinking_budget_tokens": 0}, "."),
        ({"reasoning_budget_tokens": 2, "reasoning_budget_message": " Hmm."}, "Hmm."),
        ({"reasoning_budget_tokens": 100}, None),  # the model ends the block itself
    ],
)
def test_chat_budget_cuts_the_thinking_as_llama_server(servers, extra, cut) -> None:
    ours, peer = (_chat(url, **extra)["choices"][0]["message"] for url in servers)
    # the same tokens, the same text (whitespace around the block included)
    for field in ("content", "reasoning_content"):
        assert ours.get(field) == peer.get(field)
    if cut is not None:
        assert ours["reasoning_content"].endswith(cut)
    else:
        assert "OK." not in ours["reasoning_content"]


def test_budget_zero_and_five_differ(servers) -> None:
    ours = servers[0]
    short = _chat(ours, thinking_budget_tokens=0, reasoning_format="none")
    longer = _chat(ours, reasoning_format="none")
    # format none: the content opens with the prompt's "<think>\n", as llama-server's
    assert short["choices"][0]["message"]["content"].startswith("<think>\n.</think>")
    assert longer["choices"][0]["message"]["content"] == "<think>\n\nThe answer is OK.</think>"


def test_completion_budget_with_its_own_tags(servers) -> None:
    body = {
        "prompt": PROMPT,
        "n_predict": 30,
        "temperature": 0,
        "reasoning_budget_tokens": 3,
        "reasoning_budget_start_tag": "<think>",
        "reasoning_budget_end_tags": ["</think>"],
        "generation_prompt": "<|im_start|>assistant\n<think>\n",
        "reasoning_budget_message": " Done.",
    }
    single = {**body, "reasoning_budget_end_tag": "</think>"}
    del single["reasoning_budget_end_tags"]
    out = []
    for url in servers:
        for b in (body, single, {"prompt": PROMPT, "n_predict": 30, "temperature": 0}):
            out.append(httpx.post(url + "/completion", json=b, timeout=60).json()["content"])
    assert out[:3] == out[3:]
    assert out[0] == out[1] == "\nThe Done.</think>" and out[2] != out[0]
    bad = httpx.post(servers[0] + "/completion", json={**body, "reasoning_budget_tokens": -2})
    assert bad.status_code == 400 and "reasoning_budget_tokens" in bad.json()["error"]["message"]


def test_anthropic_thinking_budget_tokens(servers) -> None:
    thoughts = []
    for url in servers:
        claude = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
        msg = claude.messages.create(
            model="x",
            max_tokens=30,
            messages=ASK,  # type: ignore[arg-type]
            thinking={"type": "enabled", "budget_tokens": 3},
            extra_body={"temperature": 0},
        )
        thoughts.append([b.thinking for b in msg.content if b.type == "thinking"])
    assert thoughts[0] == thoughts[1] and [t.strip() for t in thoughts[0]] == ["The OK."]


def _controlled(url: str, control_at: int, **extra: object) -> tuple[str, str, dict]:
    """Stream a long thinking chat; after ``control_at`` chunks, ask to end the thinking.
    (reasoning, content, the control answer)."""
    body = {"messages": [{"role": "user", "content": "Write a very long essay about Rome."}],
            "max_tokens": 300, "temperature": 0, "stream": True, "ignore_eos": True,
            "reasoning_budget_tokens": 100000, **extra}  # fmt: skip
    reasoning = content = ""
    answer: dict = {}
    with (
        httpx.Client(timeout=120) as c,
        c.stream("POST", url + "/v1/chat/completions", json=body) as r,
    ):
        n = 0
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            for choice in chunk["choices"]:
                reasoning += choice["delta"].get("reasoning_content") or ""
                content += choice["delta"].get("content") or ""
            n += 1
            if n == control_at:
                ask = {"id": chunk["id"], "action": "reasoning_end"}
                answer = c.post(url + "/v1/chat/completions/control", json=ask).json()
    return reasoning, content, answer


def test_control_ends_a_running_thinking_block(servers) -> None:
    ours = servers[0]
    reasoning, content, answer = _controlled(ours, 20, reasoning_control=True)
    assert answer == {"success": True}
    assert reasoning.rstrip().endswith("OK.") and content  # the block was closed, the reply went on
    assert len(reasoning.split()) < 60  # ended early: 300 tokens of essay would be far longer
    # without reasoning_control the running completion says so, and thinks on
    reasoning, content, answer = _controlled(ours, 20)
    assert answer == {
        "success": False,
        "message": "reasoning control not enabled for this completion",
    }
    assert not content


def test_control_errors_match_llama_server(servers) -> None:
    def ask(url: str) -> list[object]:
        out: list[object] = []
        for body in ({"action": "reasoning_end"}, {"id": "chatcmpl-x", "action": "nope"},
                     {"id": "chatcmpl-x", "action": "reasoning_end"}):  # fmt: skip
            r = httpx.post(url + "/v1/chat/completions/control", json=body)
            data = r.json()
            out.append((r.status_code, data["error"]["message"] if "error" in data else data))
        return out

    ours, peer = (ask(url) for url in servers)
    assert ours == peer
    assert ours[2] == (200, {"success": False, "message": "no active completion for this id"})


def test_openai_client_passes_the_budget(servers) -> None:
    with openai.OpenAI(base_url=servers[0] + "/v1", api_key="unused", max_retries=0) as client:
        r = client.chat.completions.create(
            model="x",
            messages=ASK,  # type: ignore[arg-type]
            max_tokens=40,
            temperature=0,
            extra_body={"thinking_budget_tokens": 0, "reasoning_format": "none"},
        )
    assert (r.choices[0].message.content or "").startswith("<think>\n.</think>")


def test_budget_flag_is_checked(smollm_path: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "pyllama.server", "-m", smollm_path, "--reasoning-budget", "-2"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode != 0 and "--reasoning-budget" in out.stderr
