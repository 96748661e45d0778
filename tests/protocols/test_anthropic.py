"""The Anthropic Messages API (/v1/messages, /v1/messages/count_tokens) through
pyllama-server with the real model and the official ``anthropic`` client."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import orjson
import pytest

from helpers.thinking import THOUGHT

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
}
HELLO = [{"role": "user", "content": "Say hello"}]
GREEDY = {"temperature": 0}  # the 2.x client sends sampling fields as extra body fields


@pytest.fixture(scope="module")
def claude(server: str) -> Iterator[anthropic.Anthropic]:
    # closed at the end: its pooled connections otherwise wait for the garbage collector,
    # whose ResourceWarning then lands in whichever test runs at that moment
    with anthropic.Anthropic(base_url=server, api_key="unused", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def caller(call_server: str) -> Iterator[anthropic.Anthropic]:
    """On a template whose forced call comes out (tests/conftest.py: call_server)."""
    with anthropic.Anthropic(base_url=call_server, api_key="unused", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def tooled(tool_server: str) -> Iterator[anthropic.Anthropic]:
    """On a template that renders tools (tests/conftest.py: tool_server)."""
    with anthropic.Anthropic(base_url=tool_server, api_key="unused", max_retries=0) as client:
        yield client


def test_create(claude):
    msg = claude.messages.create(model="x", max_tokens=24, messages=HELLO, extra_body=GREEDY)
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
    assert [b.type for b in msg.content] == ["text"] and msg.content[0].text.strip()
    assert msg.stop_reason in ("end_turn", "max_tokens")
    assert 0 < msg.usage.output_tokens <= 24 and msg.usage.input_tokens > 0
    again = claude.messages.create(model="x", max_tokens=24, messages=HELLO, extra_body=GREEDY)
    assert again.content[0].text == msg.content[0].text  # greedy is deterministic
    # a repeated prompt is served from the slot's cache: Anthropic counts it apart
    assert again.usage.cache_read_input_tokens > 0
    total = again.usage.input_tokens + again.usage.cache_read_input_tokens
    assert total == msg.usage.input_tokens + msg.usage.cache_read_input_tokens


def test_max_tokens_and_sampling_fields(claude):
    msg = claude.messages.create(
        model="x",
        max_tokens=5,
        messages=[{"role": "user", "content": "Write a long story about a dragon."}],
        metadata={"user_id": "u-1"},
        extra_body={"temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": 3},
    )
    assert msg.stop_reason == "max_tokens" and msg.usage.output_tokens == 5


def test_system_string_and_blocks(claude):
    plain = claude.messages.count_tokens(model="x", messages=HELLO).input_tokens
    system = "You are a pirate. Answer like one."
    as_str = claude.messages.count_tokens(model="x", system=system, messages=HELLO)
    as_blocks = claude.messages.count_tokens(
        model="x", system=[{"type": "text", "text": system}], messages=HELLO
    )
    assert as_str.input_tokens == as_blocks.input_tokens
    # SmolLM2's template puts a default system prompt when none is given
    assert as_str.input_tokens != plain
    msg = claude.messages.create(model="x", max_tokens=16, system=system, messages=HELLO)
    assert msg.content[0].text.strip()


def test_stop_sequences(claude):
    ask = [{"role": "user", "content": "Count from one to ten in words."}]
    free = claude.messages.create(model="x", max_tokens=40, messages=ask, extra_body=GREEDY)
    words = free.content[0].text.split()
    assert len(words) > 3
    stop = words[2]
    msg = claude.messages.create(
        model="x", max_tokens=40, messages=ask, extra_body=GREEDY, stop_sequences=[stop]
    )
    assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == stop
    assert stop not in msg.content[0].text
    assert free.content[0].text.startswith(msg.content[0].text)


def test_stream_events(claude, server):
    kw = dict(model="x", max_tokens=20, messages=HELLO, extra_body=GREEDY)
    with claude.messages.stream(**kw) as stream:
        events = list(stream)
        final = stream.get_final_message()
    types = [e.type for e in events]
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert types.index("content_block_start") < types.index("content_block_stop")
    assert types.index("message_delta") > types.index("content_block_stop")
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    whole = claude.messages.create(**kw)
    assert text == final.content[0].text == whole.content[0].text
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens

    # the raw wire: named SSE events, a ping after message_start
    body = {"model": "x", "max_tokens": 20, "messages": HELLO, "stream": True}
    with httpx.stream("POST", server + "/v1/messages", json=body, timeout=60) as r:
        names = [line[7:] for line in r.iter_lines() if line.startswith("event: ")]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]


def test_forced_tool_use_and_result(caller):
    claude = caller
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    msg = claude.messages.create(
        model="x",
        max_tokens=64,
        messages=ask,
        tools=[WEATHER],
        # one call: with parallel calls allowed the tiny model repeats the call to the limit
        tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        extra_body=GREEDY,
    )
    assert msg.stop_reason in ("tool_use", "max_tokens")
    (use,) = [b for b in msg.content if b.type == "tool_use"]
    assert use.name == "get_weather" and isinstance(use.input, dict)
    use.input = {"location": "Paris"}  # whole arguments (this model's may be cut short)
    reply = claude.messages.create(
        model="x",
        max_tokens=32,
        tools=[WEATHER],
        messages=[
            *ask,
            {"role": "assistant", "content": [use.model_dump()]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 25 C"},
                    {"type": "text", "text": "Answer in one sentence."},
                ],
            },
        ],
        tool_choice={"type": "none"},
    )
    assert reply.stop_reason in ("end_turn", "max_tokens")
    assert reply.content[0].type == "text" and reply.content[0].text.strip()


def test_streamed_tool_use(caller):
    with caller.messages.stream(
        model="x",
        max_tokens=64,
        messages=[{"role": "user", "content": "Weather in Rome?"}],
        tools=[WEATHER],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        extra_body=GREEDY,
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    starts = [e for e in events if e.type == "content_block_start"]
    stops = [e for e in events if e.type == "content_block_stop"]
    assert [e.index for e in starts] == list(range(len(starts))) == [e.index for e in stops]
    uses = [b for b in final.content if b.type == "tool_use"]
    assert uses and uses[0].name == "get_weather"
    assert final.stop_reason in ("tool_use", "max_tokens")
    # the input arrived as input_json_delta pieces, as the parser read the call
    pieces = [e.delta.partial_json for e in events if e.type == "content_block_delta"
              and e.delta.type == "input_json_delta"]  # fmt: skip
    assert pieces


def test_structured_output(claude):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
        "required": ["city", "sunny"],
    }
    msg = claude.messages.create(
        model="x",
        max_tokens=48,
        messages=[{"role": "user", "content": "Is it sunny in Paris? Reply in JSON."}],
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    data = orjson.loads(msg.content[0].text)
    assert isinstance(data["city"], str) and isinstance(data["sunny"], bool)


def test_count_tokens(tooled):
    claude = tooled
    base = claude.messages.count_tokens(model="x", messages=HELLO).input_tokens
    with_tools = claude.messages.count_tokens(model="x", messages=HELLO, tools=[WEATHER])
    assert base > 0 and with_tools.input_tokens > base
    prompt = claude.messages.create(model="x", max_tokens=1, messages=HELLO, extra_body=GREEDY)
    used = prompt.usage.input_tokens + prompt.usage.cache_read_input_tokens
    assert used == base


def test_thinking_blocks(thinking_server):
    with anthropic.Anthropic(base_url=thinking_server, api_key="unused", max_retries=0) as claude:
        # the grammar (a llama-server extension field) stands in for a model that thinks
        kw = dict(model="x", max_tokens=32, messages=HELLO, extra_body={"grammar": THOUGHT})
        msg = claude.messages.create(**kw)
        assert [b.type for b in msg.content] == ["thinking", "text"]
        # verbatim, as llama-server: the prompt's "\n" after <think>, the reply's after </think>
        assert msg.content[0].thinking == "\nPlan: be brief.\n"
        assert msg.content[0].signature == ""
        assert msg.content[1].text == "\n\nParis is sunny."
        with claude.messages.stream(**kw) as stream:
            events = list(stream)
            final = stream.get_final_message()
        assert [b.type for b in final.content] == ["thinking", "text"]
        assert final.content[0].thinking == "\nPlan: be brief.\n"
        assert final.content[1].text == "\n\nParis is sunny."
        deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
        # the signature closes the thinking block before the text block opens
        first_text = deltas.index("text_delta")
        assert deltas.index("signature_delta") < first_text
        assert "thinking_delta" in deltas[:first_text]


def test_errors_have_anthropic_shape(claude, server):
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(
            model="x",
            max_tokens=8,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
                        },
                        {"type": "text", "text": "What is this?"},
                    ],
                }
            ],
        )
    assert "image input is not supported" in e.value.message
    bad = [
        {"model": "x", "messages": HELLO},  # max_tokens is required
        {"model": "x", "max_tokens": 8},  # so are the messages
        {"model": "x", "max_tokens": "many", "messages": HELLO},
        {"model": "x", "max_tokens": 8, "messages": [{"role": "robot", "content": "hi"}]},
        {"model": "x", "max_tokens": 8, "messages": [{"role": "user", "content": 5}]},
        {"model": "x", "max_tokens": 8, "messages": HELLO, "tools": [{"type": "web_search"}]},
        {"model": "x", "max_tokens": 8, "messages": HELLO, "tool_choice": {"type": "maybe"}},
    ]
    for body in bad:
        r = httpx.post(server + "/v1/messages", json=body, timeout=30)
        assert r.status_code == 400, (body, r.text)
        err = orjson.loads(r.content)
        assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
        assert err["error"]["message"]
    r = httpx.post(server + "/v1/messages/count_tokens", content=b"[1]", timeout=30)
    assert r.status_code == 400 and orjson.loads(r.content)["type"] == "error"


def test_context_overflow_is_refused(claude):
    long = "word " * 9000
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(
            model="x", max_tokens=8, messages=[{"role": "user", "content": long}]
        )
    assert e.value.body["error"]["type"] == "invalid_request_error"
    assert "context" in e.value.message
