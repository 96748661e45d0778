"""Tool calls and reasoning through pyllama-server with the real model and the openai SDK.

Tools go through llama.cpp's chat layer: SmolLM2's own template knows no tools, so, as
llama-server, it renders none (and no grammar holds the reply); a tool-capable template
(Qwen2.5's, whose calls are Hermes-style ``<tool_call>`` JSON, on the same ChatML model)
gets the tools, the call grammar and the parser (``tool_server``); Gemma 4's template is
used where a call must come out (``call_server``, tests/conftest.py). Reasoning uses a
Qwen3-style thinking template."""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest

from helpers.thinking import THOUGHT
from helpers.tool_defs import TIME, WEATHER

ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def client(call_server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=call_server + "/v1", api_key="unused", max_retries=0)


def test_required_tool_call(client):
    r = client.chat.completions.create(
        model="x",
        messages=ASK,
        tools=[WEATHER],
        tool_choice="required",
        temperature=0,
        max_tokens=64,
    )
    choice = r.choices[0]
    assert choice.finish_reason in ("tool_calls", "length")
    assert not choice.message.content
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert len(call.id) == 32  # llama-server's gen_tool_call_id


def test_streamed_tool_call_equals_whole(client):
    kw = dict(
        model="x",
        messages=ASK,
        tools=[WEATHER],
        tool_choice="required",
        temperature=0,
        max_tokens=64,
    )
    whole = client.chat.completions.create(**kw).choices[0].message.tool_calls[0]
    calls: dict[int, dict] = {}
    finish = None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            for tc in c.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"name": "", "arguments": ""})
                slot["name"] += tc.function.name or ""
                slot["arguments"] += tc.function.arguments or ""
            assert not c.delta.content  # nothing of the call leaks as content
            finish = c.finish_reason or finish
    assert finish in ("tool_calls", "length")
    assert calls[0] == {"name": whole.function.name, "arguments": whole.function.arguments}


def test_named_tool_choice_and_round_trip(client):
    r = client.chat.completions.create(
        model="x",
        messages=ASK,
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        temperature=0,
        max_tokens=64,
    )
    call = r.choices[0].message.tool_calls[0]
    assert call.function.name == "get_time"
    # the call (its arguments made whole: this model's may be cut by max_tokens) and its
    # result go back in; the model answers (auto: call or response)
    sent = call.model_dump()
    sent["function"]["arguments"] = '{"zone": "UTC"}'
    follow = client.chat.completions.create(
        model="x",
        messages=[
            *ASK,
            {"role": "assistant", "content": None, "tool_calls": [sent]},
            {"role": "tool", "tool_call_id": call.id, "content": "12:00 UTC"},
        ],
        tools=[WEATHER, TIME],
        temperature=0,
        max_tokens=48,
    )
    assert follow.choices[0].finish_reason in ("stop", "tool_calls", "length")


def test_a_template_without_tools_renders_none_as_llama_server(server):
    """SmolLM2's template reads no tools: the prompt is the same with them or without (no
    pyllama-made tool prompt), and the reply is plain content."""
    prompts = [
        httpx.post(server + "/apply-template", json={"messages": ASK, **extra}, timeout=30).json()
        for extra in ({}, {"tools": [WEATHER]})
    ]
    assert prompts[0] == prompts[1]
    r = httpx.post(
        server + "/v1/chat/completions",
        json={"messages": ASK, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 8},
        timeout=60,
    )
    msg = r.json()["choices"][0]["message"]
    assert r.status_code == 200 and msg["content"] and "tool_calls" not in msg


def test_past_calls_render_in_the_templates_syntax(tool_server):
    history = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"zone": "UTC"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12:00 UTC"},
    ]
    r = httpx.post(tool_server + "/apply-template", json={"messages": history}, timeout=30)
    prompt = r.json()["prompt"]
    call = prompt.split("<tool_call>\n")[1].split("\n</tool_call>")[0]
    assert json.loads(call) == {"name": "get_time", "arguments": {"zone": "UTC"}}
    assert "<tool_response>\n12:00 UTC\n</tool_response>" in prompt


def test_tool_choice_none_gives_plain_text(client):
    r = client.chat.completions.create(
        model="x", messages=ASK, tools=[WEATHER], tool_choice="none", temperature=0, max_tokens=16
    )
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "nope"),
        ({"grammar": 'root ::= "x"'}, "grammar"),
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "name"),
    ],
)
def test_bad_tool_requests_are_400(tool_server, extra, match):
    body = {"messages": ASK, "tools": [WEATHER], "max_tokens": 4, **extra}
    r = httpx.post(tool_server + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert re.search(match, err["message"])


def test_reasoning_content_whole_and_streamed(thinking_server):
    client = openai.OpenAI(base_url=thinking_server + "/v1", api_key="unused", max_retries=0)
    kw = dict(
        model="x", messages=ASK, max_tokens=32, temperature=0, extra_body={"grammar": THOUGHT}
    )
    msg = client.chat.completions.create(**kw).choices[0].message
    # verbatim, as llama-server (tests/protocols/test_reasoning_text.py compares)
    assert msg.content == "\n\nParis is sunny."
    assert msg.model_extra["reasoning_content"] == "\nPlan: be brief.\n"

    reasoning, content = "", ""
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            reasoning += (c.delta.model_extra or {}).get("reasoning_content") or ""
            content += c.delta.content or ""
    assert reasoning == "\nPlan: be brief.\n" and content == "\n\nParis is sunny."

    # reasoning_format none: the thinking stays in the content, opened by the prompt's tag
    raw = (
        client.chat.completions.create(
            **{**kw, "extra_body": {"grammar": THOUGHT, "reasoning_format": "none"}}
        )
        .choices[0]
        .message
    )
    assert raw.content == "<think>\nPlan: be brief.\n</think>\n\nParis is sunny."
    assert "reasoning_content" not in (raw.model_extra or {})
