"""Tool calls and reasoning through pyllama-server with the real model and the openai SDK.

SmolLM2's template knows no tools, so the server uses the generic scheme: the tools are
described in a system message and a grammar makes the reply a JSON tool call (required) or
either a call or a response (auto). Reasoning uses a Qwen3-style thinking template."""

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
def client(server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0)


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
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Rome", "Oslo")
    assert len(call.id) == 32


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
            assert not c.delta.content  # nothing of the JSON leaks as content
            finish = c.finish_reason or finish
    assert finish == "tool_calls"
    assert calls == {0: {"name": whole.function.name, "arguments": whole.function.arguments}}


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
    # the call and its result go back in; the model answers (auto: call or response)
    follow = client.chat.completions.create(
        model="x",
        messages=[
            *ASK,
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "12:00 UTC"},
        ],
        tools=[WEATHER, TIME],
        temperature=0,
        max_tokens=48,
    )
    assert follow.choices[0].finish_reason in ("stop", "tool_calls", "length")


def test_generic_template_renders_past_calls(server):
    # SmolLM2's template ignores tool_calls: the call is written into the assistant turn
    # as the JSON the model replies with, so the model sees what it called
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
    r = httpx.post(server + "/apply-template", json={"messages": history}, timeout=30)
    prompt = r.json()["prompt"]
    turn = prompt.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    assert json.loads(turn) == {"tool_calls": [{"name": "get_time", "arguments": {"zone": "UTC"}}]}
    assert "<|im_start|>tool\n12:00 UTC<|im_end|>" in prompt


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
        ({"response_format": {"type": "json_object"}}, "grammar"),
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, r"tools\[0\]"),
    ],
)
def test_bad_tool_requests_are_400(server, extra, match):
    body = {"messages": ASK, "tools": [WEATHER], "max_tokens": 4, **extra}
    r = httpx.post(server + "/v1/chat/completions", json=body, timeout=60)
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
