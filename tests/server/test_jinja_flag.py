"""``--jinja`` / ``--no-jinja``: with Jinja the model's template is run (SmolLM2's adds its
default system prompt); without it, llama.cpp's built-in format picked from the template text
(plain ChatML here), as llama-server renders it, and tools are refused as llama-server
refuses them."""

from __future__ import annotations

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

CHAT = {"messages": [{"role": "user", "content": "hi"}]}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def _prompt(url: str) -> str:
    r = httpx.post(url + "/apply-template", json=CHAT, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["prompt"]


@pytest.fixture(scope="module")
def prompts(smollm_path: str) -> dict[str, tuple[str, str]]:
    out = {}
    for flag in ("--jinja", "--no-jinja"):
        args = ("-m", smollm_path, "-c", "512", flag)
        with running_server(*args) as ours, running_peer(*args) as peer:
            out[flag] = (_prompt(ours), _prompt(peer))
    return out


@pytest.mark.flag_effect("--jinja")
def test_templates_render_as_llama_servers(prompts) -> None:
    for ours, peer in prompts.values():
        assert ours == peer
    assert prompts["--jinja"][0] != prompts["--no-jinja"][0]
    assert prompts["--no-jinja"][0] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.flag_effect("--jinja")
def test_no_jinja_refuses_tools(smollm_path: str) -> None:
    with running_server("-m", smollm_path, "-c", "512", "--no-jinja") as url:
        for extra, word in (
            ({"tools": [TOOL]}, "tools"),
            ({"tool_choice": "required"}, "tool_choice"),
        ):
            r = httpx.post(url + "/v1/chat/completions", json={**CHAT, **extra}, timeout=30)
            assert r.status_code == 400
            assert r.json()["error"]["message"] == f"{word} param requires --jinja flag"
        ok = httpx.post(url + "/v1/chat/completions", json={**CHAT, "max_tokens": 4}, timeout=60)
        assert ok.status_code == 200
