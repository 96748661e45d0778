"""Anthropic Messages and OpenAI Responses requests with history (system blocks, thinking,
tool calls and their results, Claude Code's billing header) reach the template as
llama-server's own conversions put them: both servers on SmolLM2 with Qwen2.5's template,
the same token counts and the same greedy answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather.", "input_schema": SCHEMA}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]

ANTHROPIC = {
    "system_blocks": {
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=a1b2c;"},
            {"type": "text", "text": "You are brief."},
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
    },
    "tool_history": {
        "system": "You are brief.",
        "tools": ANTHROPIC_TOOLS,
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should call the tool.", "signature": "s"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "t1", "name": "get_weather",
                     "input": {"city": "Paris"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1",
                     "content": [{"type": "text", "text": "Sunny, "}, {"type": "text", "text": "21C"}]},
                    {"type": "text", "text": "And tomorrow?"},
                ],
            },
        ],
    },
}  # fmt: skip

RESPONSES = {
    "instructions_and_items": {
        "instructions": "You are brief.",
        "tools": RESPONSES_TOOLS,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather",
             "arguments": "{\"city\": \"Paris\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "Sunny, 21C"},
            {"role": "user", "content": "And tomorrow?"},
        ],
    },
    "reasoning_and_messages": {
        "input": [
            {"type": "message", "role": "developer", "content": "Answer in one word."},
            {"role": "user", "content": "Hi"},
            {"type": "reasoning", "summary": [],
             "content": [{"type": "reasoning_text", "text": "A greeting."}]},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Hello"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Again"}]},
        ],
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def servers(smollm_path: str, vendor_models: Path) -> Iterator[tuple[str, str]]:
    template = vendor_models / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
    args = ["-m", smollm_path, "-t", "2", "-c", "4096", "-np", "1", "--jinja"]
    args += ["--chat-template-file", str(template)]
    with running_peer(*args) as peer, running_server(*args) as ours:
        yield peer, ours


def _post(url: str, path: str, body: dict[str, Any]) -> Any:
    r = httpx.post(url + path, json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("name", sorted(ANTHROPIC))
def test_anthropic_history_as_llama_server(servers: tuple[str, str], name: str) -> None:
    body = ANTHROPIC[name]
    counts = [_post(u, "/v1/messages/count_tokens", body)["input_tokens"] for u in servers]
    assert counts[0] == counts[1]
    whole = {**body, "max_tokens": 8, "temperature": 0}
    answers = [_post(u, "/v1/messages", whole) for u in servers]
    assert answers[0]["content"] == answers[1]["content"]
    assert answers[0]["usage"]["input_tokens"] == answers[1]["usage"]["input_tokens"]


@pytest.mark.parametrize("name", sorted(RESPONSES))
def test_responses_history_as_llama_server(servers: tuple[str, str], name: str) -> None:
    body = {**RESPONSES[name], "max_output_tokens": 8, "temperature": 0}
    answers = [_post(u, "/v1/responses", body) for u in servers]
    usage = [a["usage"]["input_tokens"] for a in answers]
    assert usage[0] == usage[1]
    texts = [[o.get("content") for o in a["output"] if o["type"] == "message"] for a in answers]
    assert texts[0] == texts[1]
