"""llama-server's own request conversions, bound (``_core.chat_anthropic_to_openai``,
``_core.chat_responses_to_openai``): an Anthropic Messages or OpenAI Responses body to the
OpenAI chat body its chat layer takes (the Anthropic and Responses routes convert messages
with them: tests/protocols/test_conversions_vs_peer.py); these pin what the bound ones give,
and that bad input is a ValueError (a 400), not a crash."""

from __future__ import annotations

import json

import pytest

from pyllama import _core

TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def test_anthropic_system_tools_and_choice() -> None:
    body = {
        "system": "Be brief.",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"name": "f", "input_schema": TOOL_SCHEMA}],
        "tool_choice": {"type": "any"},
    }
    out = json.loads(_core.chat_anthropic_to_openai(json.dumps(body)))
    assert out["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert out["tools"] == [
        {
            "type": "function",
            "function": {"name": "f", "description": "", "parameters": TOOL_SCHEMA},
        }
    ]
    assert out["tool_choice"] == "required" and out["max_tokens"] == 8


def test_responses_instructions_input_and_tools() -> None:
    body = {
        "instructions": "Be brief.",
        "input": "Hi",
        "max_output_tokens": 8,
        "tools": [{"type": "function", "name": "f", "parameters": TOOL_SCHEMA}],
    }
    out = json.loads(_core.chat_responses_to_openai(json.dumps(body)))
    assert out["messages"][0] == {"role": "system", "content": "Be brief."}
    assert out["messages"][1] == {"role": "user", "content": "Hi"}
    assert out["tools"][0]["function"]["name"] == "f" and out["max_tokens"] == 8


@pytest.mark.parametrize(
    "convert", [_core.chat_anthropic_to_openai, _core.chat_responses_to_openai]
)
def test_bad_bodies_are_value_errors(convert) -> None:
    with pytest.raises(ValueError):
        convert("{not json")
