"""Chat templates that pyllama's sandbox used to refuse or render differently, rendered
through ``POST /apply-template`` of pyllama-server and of llama-server (the peer), both started
with ``--chat-template-file`` on llama.cpp's copy of the template, and compared byte for byte:
Kimi-K2 (``list.append``/``pop``, tool-call arguments as objects), FireFunction v2 (an
undefined ``functions`` added to a string), the poolside Laguna templates and LFM2.5
(``{% generation %}`` blocks; LFM2.5 reads reasoning as ``thinking``), Kimi-K3. Then the
sandbox itself: what it now allows stays inside the render."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pyllama.chat import ChatTemplate, ChatTemplateError

from helpers.peer import running_peer
from helpers.servers import running_server

TEMPLATES = [
    "moonshotai-Kimi-K2",
    "Kimi-K2-Instruct",
    "Kimi-K2-Thinking",
    "Kimi-K3",
    "fireworks-ai-llama-3-firefunction-v2",
    "poolside-Laguna-S-2.1",
    "poolside-Laguna-XS-2.1",
    "poolside-Laguna-XS.2",
    "LFM2.5-8B-A1B",
]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def _call(i: str, args: Any) -> dict[str, Any]:
    return {"id": i, "type": "function", "function": {"name": "get_weather", "arguments": args}}


USER = {"role": "user", "content": "Weather in Paris?"}
BODIES: dict[str, dict[str, Any]] = {
    "system_user": {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    },
    "assistant_turn": {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "How are you?"},
        ]
    },
    "tools": {"messages": [USER], "tools": TOOLS},
    "tool_call_and_result": {
        "messages": [
            USER,
            {"role": "assistant", "content": "", "tool_calls": [_call("c1", '{"city": "Paris"}')]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        "tools": TOOLS,
    },
    # compact JSON text and an object: a template that reads objects re-serialises both
    "parallel_calls": {
        "messages": [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Paris and Rome?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    _call("a1", '{"city":"Paris"}'),
                    _call("a2", {"city": "Rome", "days": [1, 2]}),
                ],
            },
            {"role": "tool", "tool_call_id": "a1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "a2", "content": "rain"},
            {"role": "assistant", "content": "Sunny and rainy."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": TOOLS,
    },
    "reasoning_history": {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!", "reasoning_content": "A greeting."},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Add."},
            {"role": "user", "content": "And 3+3?"},
        ]
    },
    # a list of parts where the template reads one, else joined by a newline
    "text_parts": {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            }
        ]
    },
}


@pytest.fixture(scope="module", params=TEMPLATES)
def both(request: pytest.FixtureRequest, smollm_path: str, vendor_models: Path) -> Iterator[Any]:
    path = vendor_models / "templates" / f"{request.param}.jinja"
    args = ["-m", smollm_path, "-c", "512", "-np", "1", "-t", "1", "--jinja"]
    args += ["--chat-template-file", str(path)]
    with running_server(*args) as ours, running_peer(*args) as peer:
        yield ours, peer


def _apply(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + "/apply-template", json=body, timeout=60)


@pytest.mark.parametrize("case", sorted(BODIES))
def test_renders_as_llama_server(both: tuple[str, str], case: str) -> None:
    ours, peer = (_apply(url, BODIES[case]) for url in both)
    assert peer.status_code == 200, peer.text
    assert ours.status_code == 200, ours.text
    assert ours.json()["prompt"] == peer.json()["prompt"]


def test_arguments_that_are_not_json_are_refused_as_llama_server(both: tuple[str, str]) -> None:
    """Every template here reads the arguments as an object: text that is not JSON is
    refused with llama-server's words, as a 400 (llama-server answers 500)."""
    call = {"role": "assistant", "content": "", "tool_calls": [_call("x", "{")]}
    body = {
        "messages": [USER, call, {"role": "tool", "tool_call_id": "x", "content": "?"}],
        "tools": TOOLS,
    }
    ours, peer = (_apply(url, body) for url in both)
    assert (ours.status_code, peer.status_code) == (400, 500)
    for r in (ours, peer):
        assert "Failed to parse tool call arguments as JSON" in r.json()["error"]["message"]


MESSAGES = [{"role": "user", "content": "hi"}]


def test_generation_tags_render_nothing() -> None:
    t = ChatTemplate("A{% generation %} B {% endgeneration %}C{%- generation -%}  D  ")
    assert t.render(MESSAGES) == "A B CD  "


def test_lists_the_template_builds_take_append_and_pop() -> None:
    t = ChatTemplate(
        "{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('a') %}"
        "{{ ns.ids.append('b') | length }}{{ ns.ids.pop(0) }}{{ ns.ids | tojson }}"
    )
    assert t.render(MESSAGES) == '2a["b"]'


def test_a_template_that_changes_the_messages_changes_only_its_copy() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    tools = [{"type": "function", "function": {"name": "f", "tags": ["a"]}}]
    t = ChatTemplate(
        "{% set _ = messages.pop() %}{% set _ = tools[0].function.tags.append('b') %}"
        "{% set _ = messages.append(1) %}{{ messages | length }}{{ tools[0].function.tags }}"
    )
    assert t.render(messages, tools=tools) == "1['a', 'b']"
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    assert tools == [{"type": "function", "function": {"name": "f", "tags": ["a"]}}]


@pytest.mark.parametrize(
    "source",
    [
        "{{ messages[0].update({'role': 'x'}) }}",  # dicts stay immutable
        "{% set l = [3, 1] %}{{ l.sort() }}",  # only append and pop, as llama.cpp
        "{{ messages.__class__.__mro__ }}",
        "{% set l = [] %}{% for i in range(100) %}{% set _ = l.append(i) %}{% endfor %}",
    ],
)
def test_the_sandbox_still_refuses(source: str) -> None:
    t = ChatTemplate(source, max_output=50)
    with pytest.raises(ChatTemplateError):
        t.render(MESSAGES)


def test_none_and_undefined_add_to_a_string_as_nothing() -> None:
    t = ChatTemplate("{{ 'a' + none + 'b' + missing }}|{{ missing + 'c' }}")
    assert t.render(MESSAGES) == "ab|c"
    with pytest.raises(ChatTemplateError):  # not next to a string: an error, as llama.cpp
        ChatTemplate("{{ missing + 1 }}").render(MESSAGES)
