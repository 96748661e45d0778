"""``--reasoning auto`` (the default) gives a chat template ``enable_thinking`` as
llama-server does: true only when the template supports thinking (llama.cpp's own
detection, ``common_chat_templates_support_enable_thinking``, bound), where pyllama used to
pass true to every template. ``--reasoning on`` as llama-server. Each server runs beside the peer llama-server started the
same way: the rendered prompt and the greedy reply are the peer's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

# reads enable_thinking but has no thinking block: llama.cpp finds no thinking support
ECHO = """\
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
[thinking={{ enable_thinking }}]{% endif %}"""
# Qwen3's switch: thinking is supported, so auto passes true (no closed block)
SWITCH = """\
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{%- if enable_thinking is defined and enable_thinking is false %}
<think>

</think>

{%- endif %}{% endif %}"""
USER = [{"role": "user", "content": "Name a color."}]
HEAD = "<|im_start|>user\nName a color.<|im_end|>\n<|im_start|>assistant"


@contextlib.contextmanager
def _pair(smollm_path: str, template: str, *flags: str) -> Iterator[tuple[str, str]]:
    args = ["-m", smollm_path, "-c", "512", "-np", "1", "-t", "2", "--jinja"]
    args += ["--chat-template", template, *flags]
    with running_server(*args) as ours, running_peer(*args) as peer:
        yield ours, peer


@pytest.fixture(scope="module")
def echo_auto(smollm_path: str) -> Iterator[tuple[str, str]]:
    with _pair(smollm_path, ECHO) as urls:
        yield urls


@pytest.fixture(scope="module")
def echo_on(smollm_path: str) -> Iterator[tuple[str, str]]:
    with _pair(smollm_path, ECHO, "--reasoning", "on") as urls:
        yield urls


def _prompt(url: str, **extra: object) -> str:
    r = httpx.post(url + "/apply-template", json={"messages": USER, **extra}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["prompt"]


def _reply(url: str) -> str:
    body = {"messages": USER, "temperature": 0, "max_tokens": 12}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def test_auto_gives_false_to_a_template_without_thinking(echo_auto) -> None:
    ours, peer = echo_auto
    assert _prompt(ours) == _prompt(peer) == HEAD + "\n[thinking=False]"
    assert _reply(ours) == _reply(peer)


def test_a_request_kwarg_still_wins_over_auto(echo_auto) -> None:
    kwargs = {"chat_template_kwargs": {"enable_thinking": True}}
    ours, peer = echo_auto
    assert _prompt(ours, **kwargs) == _prompt(peer, **kwargs) == HEAD + "\n[thinking=True]"


@pytest.mark.flag_effect("--reasoning")
def test_reasoning_on_gives_true_whatever_the_template(echo_on, echo_auto) -> None:
    ours, peer = echo_on
    assert _prompt(ours) == _prompt(peer) == HEAD + "\n[thinking=True]"
    assert _reply(ours) == _reply(peer)
    assert _prompt(ours) != _prompt(echo_auto[0])


def test_auto_gives_true_to_a_template_that_thinks(smollm_path: str) -> None:
    with _pair(smollm_path, SWITCH) as (ours, peer):
        assert _prompt(ours) == _prompt(peer) == HEAD  # no closed block: thinking is on
