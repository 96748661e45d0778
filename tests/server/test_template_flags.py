"""The chat-template options act as llama-server's: a template that prints what it is given
(``--chat-template-file``, ``--chat-template``, ``--chat-template-kwargs``,
``--reasoning-effort``, ``--no-reasoning-preserve``, ``--reasoning off``,
``--no-prefill-assistant``) through ``POST /apply-template``, and the reply parsing of a
template that thinks (``--reasoning-format``, ``--skip-chat-parsing``). Each server runs
beside the peer llama-server started the same way, and each flag changes what the same
request gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server
from helpers.thinking import THINKING_TEMPLATE, THOUGHT

# prints the kwargs llama.cpp hands a template; thinks unless enable_thinking is false (Qwen3)
VARS_TEMPLATE = """\
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
[effort={{ reasoning_effort | default('-') }} strength={{ reasoning_strength | default('-') }} \
preserve={{ preserve_thinking | default('-') }} clear={{ clear_thinking | default('-') }} \
drop={{ drop_thinking | default('-') }} key1={{ key1 | default('-') }}]
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif -%}
"""
USER = {"role": "user", "content": "hi"}
PREFILL = [USER, {"role": "assistant", "content": "Sure"}]
DEFAULTS = "[effort=- strength=- preserve=True clear=False drop=False key1=-]"
FLAGGED = "[effort=high strength=high preserve=False clear=True drop=True key1=v1]"


def _base(smollm_path: str) -> list[str]:
    return ["-m", smollm_path, "-c", "512", "-np", "1", "-t", "2", "--jinja"]


@pytest.fixture(scope="module")
def vars_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tpl") / "vars.jinja"
    path.write_text(VARS_TEMPLATE)
    return str(path)


def _applied(url: str) -> tuple[str, str]:
    """The prompts of a one-user chat and of one ending with an assistant message."""
    out = []
    for messages in ([USER], PREFILL):
        r = httpx.post(url + "/apply-template", json={"messages": messages}, timeout=30)
        assert r.status_code == 200, r.text
        out.append(r.json()["prompt"])
    return out[0], out[1]


@pytest.fixture(scope="module")
def plain(smollm_path: str, vars_file: str) -> Iterator[tuple[str, str]]:
    args = [*_base(smollm_path), "--chat-template-file", vars_file]
    with running_server(*args) as ours, running_peer(*args) as peer:
        yield ours, peer


@pytest.fixture(scope="module")
def flagged(smollm_path: str) -> Iterator[tuple[str, str]]:
    args = [*_base(smollm_path), "--chat-template", VARS_TEMPLATE,
            "--chat-template-kwargs", '{"key1": "v1"}', "--reasoning-effort", "high",
            "--no-reasoning-preserve", "--reasoning", "off", "--no-prefill-assistant"]  # fmt: skip
    with running_server(*args) as ours, running_peer(*args) as peer:
        yield ours, peer


@pytest.mark.flag_effect("--chat-template-file")
def test_the_template_file_renders_the_prompt(plain, smollm_path: str) -> None:
    ours, peer = (_applied(url) for url in plain)
    head = f"<|im_start|>user\nhi<|im_end|>\n{DEFAULTS}<|im_start|>assistant\n"
    # no thinking detected in this template (--reasoning auto): enable_thinking is false,
    # so it renders a closed block; the final assistant message is continued after it
    closed = head + "<think>\n\n</think>\n\n"
    assert ours == (closed, closed + "Sure")
    assert peer == ours
    with running_server(*_base(smollm_path)) as model_template:
        assert DEFAULTS not in _applied(model_template)[0]


@pytest.mark.flag_effect(
    "--chat-template",
    "--chat-template-kwargs",
    "--reasoning-effort",
    "--no-reasoning-preserve",
    "--reasoning",
    "--no-prefill-assistant",
)
def test_template_flags_reach_the_template_as_llama_servers(flagged) -> None:
    ours, peer = (_applied(url) for url in flagged)
    assert ours == peer
    gen = "<|im_start|>assistant\n<think>\n\n</think>\n\n"  # --reasoning off
    assert ours[0] == f"<|im_start|>user\nhi<|im_end|>\n{FLAGGED}{gen}"
    # no prefill: the assistant message is closed and a new turn opened
    assert ours[1] == f"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nSure<|im_end|>\n{FLAGGED}{gen}"  # fmt: skip


def test_a_request_kwarg_overrides_the_flags(flagged) -> None:
    body = {"messages": [USER], "chat_template_kwargs": {"key1": "r", "preserve_reasoning": True}}
    prompts = [httpx.post(u + "/apply-template", json=body).json()["prompt"] for u in flagged]
    assert prompts[0] == prompts[1]
    assert "preserve=True clear=False drop=False key1=r]" in prompts[0]


def _reply(url: str) -> tuple[str | None, str | None]:
    body = {"messages": [USER], "grammar": THOUGHT, "temperature": 0, "max_tokens": 40}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    m = r.json()["choices"][0]["message"]
    return m.get("reasoning_content"), m.get("content")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], ("\nPlan: be brief.\n", "\n\nParis is sunny.")),
        pytest.param(
            ["--reasoning-format", "none"],
            (None, "<think>\nPlan: be brief.\n</think>\n\nParis is sunny."),
            marks=pytest.mark.flag_effect("--reasoning-format"),
        ),
        pytest.param(
            ["--skip-chat-parsing"],
            (None, "Plan: be brief.\n</think>\n\nParis is sunny."),
            marks=pytest.mark.flag_effect("--no-skip-chat-parsing"),
        ),
    ],
)
def test_reply_parsing_flags_as_llama_server(
    smollm_path: str, tmp_path: Path, flags: list[str], expected: tuple
) -> None:
    tpl = tmp_path / "thinking.jinja"
    tpl.write_text(THINKING_TEMPLATE)
    args = [*_base(smollm_path), "--chat-template-file", str(tpl), *flags]
    with running_server(*args) as ours, running_peer(*args) as peer:
        assert _reply(ours) == _reply(peer) == expected
