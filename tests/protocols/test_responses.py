"""The OpenAI Responses API (/v1/responses) through the real openai SDK and the real model."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)

from pyllama.server.http.errors import APIError
from pyllama.server.protocols.responses.store import (
    MAX_STORED_RESPONSES,
    ResponseStore,
    StoredResponse,
)

from helpers.thinking import THOUGHT
from helpers.tool_defs import TIME as CHAT_TIME
from helpers.tool_defs import WEATHER as CHAT_WEATHER

ASK = "Name three colors."
# the chat tests' tools, in the Responses API's flat shape
WEATHER = {"type": "function", **CHAT_WEATHER["function"]}
TIME = {"type": "function", **CHAT_TIME["function"]}
ID = r"[0-9a-f]{32}"


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server + "/v1", api_key="x", max_retries=0) as c:
        yield c


@pytest.fixture(scope="module")
def caller(call_server: str) -> Iterator[openai.OpenAI]:
    """On a template whose forced call comes out (tests/conftest.py: call_server)."""
    with openai.OpenAI(base_url=call_server + "/v1", api_key="x", max_retries=0) as c:
        yield c


def _check_usage(r) -> None:
    u = r.usage
    assert u.input_tokens > 0 and u.output_tokens > 0
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert 0 <= u.input_tokens_details.cached_tokens <= u.input_tokens
    assert u.output_tokens_details.reasoning_tokens == 0


def test_create_with_string_input(client):
    r = client.responses.create(
        model="x", input=ASK, max_output_tokens=12, temperature=0, metadata={"k": "v"}
    )
    assert re.fullmatch("resp_" + ID, r.id)
    # the model as llama-server names it without --alias: the path it was loaded from
    assert r.object == "response" and Path(r.model).name.startswith("SmolLM2")
    (msg,) = r.output
    assert isinstance(msg, ResponseOutputMessage)
    assert re.fullmatch("msg_" + ID, msg.id) and msg.role == "assistant"
    assert msg.content[0].type == "output_text" and msg.content[0].annotations == []
    assert r.output_text.strip() and r.output_text == msg.content[0].text
    assert 0 < r.usage.output_tokens <= 12
    assert r.status in ("completed", "incomplete") and msg.status == r.status
    assert (r.incomplete_details is None) == (r.status == "completed")
    _check_usage(r)
    assert r.metadata == {"k": "v"} and r.temperature == 0 and r.max_output_tokens == 12
    assert r.tools == [] and r.tool_choice == "auto" and r.text.format.type == "text"
    assert r.store is True and r.previous_response_id is None


def test_instructions_are_a_system_message(client):
    listed = client.responses.create(
        model="x",
        input=[
            {"role": "system", "content": "You answer in one word."},
            {"role": "user", "content": [{"type": "input_text", "text": ASK}]},
        ],
        max_output_tokens=6,
        temperature=0,
    )
    instructed = client.responses.create(
        model="x",
        instructions="You answer in one word.",
        input=ASK,
        max_output_tokens=6,
        temperature=0,
    )
    for r in (listed, instructed):
        assert r.output_text.strip()
        _check_usage(r)
    assert instructed.instructions == "You answer in one word." and listed.instructions is None
    # the same prompt either way
    assert instructed.usage.input_tokens == listed.usage.input_tokens
    plain = client.responses.create(model="x", input=ASK, max_output_tokens=1, temperature=0)
    assert plain.usage.input_tokens != listed.usage.input_tokens


def test_stream_events_order_and_text(client, server):
    kw = dict(model="x", input=ASK, max_output_tokens=12, temperature=0)
    whole = client.responses.create(**kw)
    events = list(client.responses.create(stream=True, **kw))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [type(e) for e in events]
    n_delta = kinds.count(ResponseTextDeltaEvent)
    assert n_delta > 0
    last = ResponseCompletedEvent  # also when whole.status is "incomplete", as llama-server
    assert kinds == [
        ResponseCreatedEvent,
        ResponseInProgressEvent,
        ResponseOutputItemAddedEvent,
        ResponseContentPartAddedEvent,
        *[ResponseTextDeltaEvent] * n_delta,
        ResponseTextDoneEvent,
        ResponseContentPartDoneEvent,
        ResponseOutputItemDoneEvent,
        last,
    ]
    created, done = events[0].response, events[-1].response
    assert created.status == "in_progress" and created.output == [] and created.id == done.id
    item_id = events[2].item.id
    assert item_id.startswith("msg_") and events[2].item.status == "in_progress"
    for e in events[3:-2]:
        assert e.item_id == item_id and e.output_index == 0 and e.content_index == 0
    gathered = "".join(e.delta for e in events if isinstance(e, ResponseTextDeltaEvent))
    assert gathered == events[-4].text == done.output_text == whole.output_text
    assert events[-2].item.id == item_id == done.output[0].id
    assert done.usage.output_tokens == whole.usage.output_tokens
    _check_usage(done)

    # llama-server's path: every event names its type on an `event:` line too
    with httpx.stream(
        "POST", server + "/responses", json={**kw, "stream": True}, timeout=120
    ) as resp:
        lines = [ln for ln in resp.iter_lines() if ln]
    names = [ln[7:] for ln in lines if ln.startswith("event: ")]
    datas = [json.loads(ln[6:]) for ln in lines if ln.startswith("data: ")]
    assert names == [d["type"] for d in datas] and len(datas) == len(events)
    assert "timings" in datas[-1] and datas[-1]["timings"]["predicted_n"] > 0


def test_stream_telemetry_as_llama_server(server):
    body = {
        "input": "This is a test. " * 40,
        "max_output_tokens": 4,
        "stream": True,
        "timings_per_token": True,
        "return_progress": True,
    }
    with httpx.stream("POST", server + "/responses", json=body, timeout=120) as resp:
        datas = [json.loads(ln[6:]) for ln in resp.iter_lines() if ln.startswith("data: ")]
    progress = [d for d in datas if "prompt_progress" in d]
    assert progress and all(d["type"] == "response.in_progress" for d in progress)
    last = progress[-1]["prompt_progress"]
    assert last["total"] > 0 and last["processed"] == last["total"] >= last["cache"]
    deltas = [d for d in datas if d["type"] == "response.output_text.delta"]
    assert deltas and all(d["timings"]["predicted_n"] >= 1 for d in deltas)
    assert [d["timings"]["predicted_n"] for d in deltas] == sorted(
        d["timings"]["predicted_n"] for d in deltas
    )
    # without the flags, neither
    plain = {k: v for k, v in body.items() if k not in ("timings_per_token", "return_progress")}
    with httpx.stream("POST", server + "/responses", json=plain, timeout=120) as resp:
        datas = [json.loads(ln[6:]) for ln in resp.iter_lines() if ln.startswith("data: ")]
    assert not [d for d in datas[:-1] if "timings" in d or "prompt_progress" in d]


def test_previous_response_id_retrieve_delete(client):
    first = client.responses.create(
        model="x", input="My name is Tom.", max_output_tokens=8, temperature=0
    )
    second = client.responses.create(
        model="x",
        input="What is my name?",
        previous_response_id=first.id,
        max_output_tokens=8,
        temperature=0,
    )
    assert second.previous_response_id == first.id and second.output_text.strip()
    # the first turn (its input and its reply) is in the second's prompt
    assert second.usage.input_tokens > first.usage.total_tokens

    got = client.responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == first.output_text
    assert got.usage.total_tokens == first.usage.total_tokens
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(first.id)
    # the chain of the second response goes through the first, which is gone
    with pytest.raises(openai.NotFoundError, match="no longer stored"):
        client.responses.create(model="x", input="Hi", previous_response_id=second.id)

    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model="x", input="Hi", previous_response_id="resp_nope")
    assert e.value.body["type"] == "not_found_error" and "resp_nope" in e.value.body["message"]

    unstored = client.responses.create(
        model="x", input="Hi", store=False, max_output_tokens=1, temperature=0
    )
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def _the_call(r) -> ResponseFunctionToolCall:
    (call,) = r.output
    assert isinstance(call, ResponseFunctionToolCall)
    assert call.status == "completed"
    m = re.fullmatch("fc_([A-Za-z0-9]{32})", call.id)
    assert m and call.call_id == "call_" + m.group(1)
    return call


def test_forced_tool_call_and_its_output(caller):
    client = caller
    r = client.responses.create(
        model="x",
        input="What is the weather in Paris?",
        tools=[WEATHER, TIME],
        tool_choice="required",
        # one call, whole (this model writes long arguments; more calls would follow)
        parallel_tool_calls=False,
        max_output_tokens=200,
        temperature=0,
    )
    call = _the_call(r)
    assert call.name in ("get_weather", "get_time")
    assert r.output_text == "" and r.status == "completed"
    assert [t.name for t in r.tools] == ["get_weather", "get_time"] and r.tools[0].strict
    assert r.tool_choice == "required"

    # the result goes back as a function_call_output; the model answers in text
    follow = client.responses.create(
        model="x",
        previous_response_id=r.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}],
        tools=[WEATHER, TIME],
        tool_choice="none",
        max_output_tokens=12,
        temperature=0,
    )
    (msg,) = follow.output
    assert isinstance(msg, ResponseOutputMessage) and msg.content[0].text.strip()

    # the same turn written out as input items, without the store
    explicit = client.responses.create(
        model="x",
        input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"},
        ],
        tools=[WEATHER, TIME],
        tool_choice="none",
        max_output_tokens=1,
        temperature=0,
        store=False,
    )
    # equal: the stored turn (question and call) came before the output in `follow`
    assert explicit.usage.input_tokens == follow.usage.input_tokens


def test_named_tool_choice_streamed(caller):
    client = caller
    kw = dict(
        model="x",
        input="What time is it?",
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "name": "get_time"},
        max_output_tokens=64,
        temperature=0,
    )
    events = list(client.responses.create(stream=True, **kw))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    # the call's arguments stream in pieces, as llama.cpp's parser reads them
    kinds = [type(e) for e in events]
    n = kinds.count(ResponseFunctionCallArgumentsDeltaEvent)
    assert n >= 1 and kinds == [
        ResponseCreatedEvent,
        ResponseInProgressEvent,
        ResponseOutputItemAddedEvent,
        *[ResponseFunctionCallArgumentsDeltaEvent] * n,
        ResponseFunctionCallArgumentsDoneEvent,
        ResponseOutputItemDoneEvent,
        ResponseCompletedEvent,
    ]
    added, deltas = events[2], events[3 : 3 + n]
    done, item_done, completed = events[3 + n :]
    assert added.item.type == "function_call" and added.item.arguments == ""
    assert added.item.name == "get_time" and added.item.status == "in_progress"
    assert {d.item_id for d in deltas} == {done.item_id, added.item.id, item_done.item.id}
    assert "".join(d.delta for d in deltas) == done.arguments == item_done.item.arguments
    call = _the_call(completed.response)
    assert call.arguments == done.arguments and call.name == "get_time"
    assert completed.response.tool_choice.name == "get_time"


def test_json_schema_format(client):
    schema = {
        "type": "object",
        "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]}},
        "required": ["color"],
        "additionalProperties": False,
    }
    r = client.responses.create(
        model="x",
        input="Pick a color.",
        text={"format": {"type": "json_schema", "name": "pick", "schema": schema, "strict": True}},
        max_output_tokens=32,
        temperature=0,
    )
    assert r.status == "completed"
    value = json.loads(r.output_text)
    assert set(value) == {"color"} and value["color"] in ("red", "green", "blue")
    assert r.text.format.type == "json_schema" and r.text.format.name == "pick"
    assert r.text.format.schema_ == schema


def test_max_output_tokens_gives_incomplete(client):
    kw = dict(model="x", input="Tell me a long story.", max_output_tokens=2, temperature=0)
    r = client.responses.create(**kw)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 2 and r.output[0].status == "incomplete"
    events = list(client.responses.create(stream=True, **kw))
    last = events[-1]
    # the closing event is response.completed carrying status "incomplete" (llama-server's
    # event; the SDK's stream helper needs it to give the final response)
    assert isinstance(last, ResponseCompletedEvent) and last.response.status == "incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"
    with client.responses.stream(**kw) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.status == "incomplete" and final.output_text == r.output_text
    assert last.response.output_text == r.output_text and last.response.output[0].status == (
        "incomplete"
    )


@pytest.mark.parametrize(
    "body, match",
    [
        ({}, r"'input'"),
        ({"input": 123}, r"'input"),
        ({"input": []}, r"'input' must not be empty"),
        ({"input": [123]}, r"input\[0\] must be an object"),
        ({"input": [{"role": "robot", "content": "x"}]}, r"input\[0\]\.role"),
        ({"input": [{"role": "user", "content": 5}]}, r"input\[0\]\.content"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "image input is not supported - hint",  # no projector
        ),
        ({"input": [{"type": "function_call", "name": "f"}]}, r"input\[0\]\.call_id"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, r"'item_reference' is not"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, r"tools\[0\].*'web_search'"),
        ({"input": "hi", "tools": [{"type": "function"}]}, r"tools\[0\]\.name"),
        ({"input": "hi", "tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        (
            {"input": "hi", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "x"}},
            "'x'",
        ),
        ({"input": "hi", "tool_choice": "required"}, "needs 'tools'"),
        ({"input": "hi", "text": {"format": {"type": "yaml"}}}, r"text\.format\.type"),
        ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "n"}}}, "schema"),
        ({"input": "hi", "max_output_tokens": "many"}, "'max_output_tokens'"),
        ({"input": "hi", "max_output_tokens": 0}, "'max_output_tokens'"),
        ({"input": "hi", "temperature": "hot"}, "'temperature'"),
        ({"input": "hi", "metadata": {str(i): "v" for i in range(17)}}, "'metadata'"),
        ({"input": "hi", "background": True}, "'background'"),
    ],
)
def test_bad_requests_are_400(client, server, body, match):
    with pytest.raises(openai.BadRequestError) as e:
        client.post("/responses", body=body, cast_to=httpx.Response)
    err = e.value.body
    assert err["code"] == 400 and err["type"] == "invalid_request_error"
    assert re.search(match, err["message"]), err["message"]
    assert httpx.get(server + "/health").status_code == 200


def test_reasoning_items_whole_and_streamed(thinking_server):
    c = openai.OpenAI(base_url=thinking_server + "/v1", api_key="x", max_retries=0)
    with c as client:
        kw = dict(
            model="x",
            input="Weather?",
            max_output_tokens=32,
            temperature=0,
            extra_body={"grammar": THOUGHT},
        )
        r = client.responses.create(**kw)
        reasoning, msg = r.output
        assert isinstance(reasoning, ResponseReasoningItem) and reasoning.id.startswith("rs_")
        assert reasoning.content[0].type == "reasoning_text"
        assert reasoning.content[0].text == "\nPlan: be brief.\n"  # verbatim, as llama-server
        assert r.output_text == "\n\nParis is sunny." and msg.id.startswith("msg_")
        details = r.usage.output_tokens_details
        assert 0 < details.reasoning_tokens < r.usage.output_tokens

        events = list(client.responses.create(stream=True, **kw))
        kinds = [e.type for e in events]
        first_text = kinds.index("response.output_text.delta")
        assert kinds.index("response.reasoning_text.done") < first_text
        thought = "".join(e.delta for e in events if isinstance(e, ResponseReasoningTextDeltaEvent))
        assert thought == "\nPlan: be brief.\n"
        added = [e.item for e in events if isinstance(e, ResponseOutputItemAddedEvent)]
        assert [a.type for a in added] == ["reasoning", "message"]
        final = events[-1].response
        assert [o.type for o in final.output] == ["reasoning", "message"]
        assert final.output_text == "\n\nParis is sunny."
        # the reasoning item goes back in as the assistant's reasoning: accepted
        again = client.responses.create(
            model="x",
            input=[
                {"role": "user", "content": "Weather?"},
                *[o.model_dump(exclude_none=True) for o in r.output],
                {"role": "user", "content": "Thanks"},
            ],
            max_output_tokens=1,
            temperature=0,
        )
        assert again.usage.input_tokens > r.usage.input_tokens


def _stored(rid: str, previous: str | None = None) -> StoredResponse:
    out = [{"type": "message", "role": "assistant", "content": f"out {rid}"}]
    return StoredResponse(
        {"id": rid, "previous_response_id": previous, "output": out},
        [{"role": "user", "content": f"in {rid}"}],
    )


def test_store_is_a_bounded_lru_and_chains():
    store = ResponseStore(capacity=3)
    store.put(_stored("a"))
    store.put(_stored("b", "a"))
    store.put(_stored("c", "b"))
    texts = [i["content"] for i in store.conversation("c")]  # touches c, b and a
    assert texts == ["in a", "out a", "in b", "out b", "in c", "out c"]
    store.put(_stored("x"))  # evicts the least recently used: c (a was touched last)
    assert len(store) == 3 and store.get("c") is None and store.get("a") is not None
    store.put(_stored("y"))
    store.put(_stored("z"))
    assert len(store) == 3 and store.get("b") is None
    with pytest.raises(APIError, match="not found") as e:
        store.conversation("c")
    assert e.value.status == 404
    store.put(_stored("d", "b"))
    with pytest.raises(APIError, match="'b', an earlier turn of 'd'"):
        store.conversation("d")
    assert store.delete("d") and not store.delete("d")
    assert MAX_STORED_RESPONSES >= 100
