"""Model output parsed through the binding, for every chat family llama.cpp's chat layer knows.

Each case (tests/helpers/chat_parse_cases.py) is one of llama.cpp's own tests/test-chat.cpp parser cases: a template
from vendor/llama.cpp/models/templates, the request options the C++ test sets, the model output
text, and the message that output must give (content, reasoning_content, tool calls). The request
goes through ``_core.ChatTemplates.chat_params`` as an OpenAI chat body (llama-server's
oaicompat_chat_params_parse), and the output through ``_core.ChatReader`` (llama-server's
task_result_state), twice: whole, as one final update, and streamed, a few characters at a time,
where the OpenAI deltas the reader gives must add up to the same message. As in the C++ harness,
content and reasoning are compared with surrounding whitespace stripped, tool call arguments as
JSON, and tool call ids only where the case names one.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyllama import _core

from helpers.chat_parse_cases import CASES, MESSAGE_USER, TOOLS, Case

_ids: dict[str, int] = {}


def _case_id(case: Case) -> str:
    n = _ids.get(case.family, 0)
    _ids[case.family] = n + 1
    return f"{case.family}-{n}"


CASE_IDS = [_case_id(c) for c in CASES]

# streamed cases where the reader parts from the C++ expectation: (template, line) -> why
STREAMED_XFAIL: dict[tuple[str, int], str] = {
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", 5917): (
        "task_result_state::update_chat_msg fixes each tool call's id the first time the call "
        "appears (common_chat_msg::set_tool_call_ids); Mistral Nemo writes its id after the "
        "arguments, so a stream keeps a generated id in place of the model's '123456789' "
        "(llama-server streams the same); the whole reply keeps it"
    ),
}
STREAMED = [
    pytest.param(
        c,
        id=i,
        marks=[pytest.mark.xfail(strict=True, reason=STREAMED_XFAIL[(c.template, c.line)])]
        if (c.template, c.line) in STREAMED_XFAIL
        else [],
    )
    for c, i in zip(CASES, CASE_IDS)
]


def _body(case: Case) -> dict[str, Any]:
    """The OpenAI chat body that asks for what the C++ case's common_chat_templates_inputs hold."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": MESSAGE_USER}]
    if case.prefill is not None:
        # a trailing assistant message: llama-server continues it (prefill_assistant)
        messages.append(dict(case.prefill))
    body: dict[str, Any] = {
        "messages": messages,
        "parallel_tool_calls": case.parallel_tool_calls,
        "reasoning_format": case.reasoning_format,
    }
    if case.tools:
        body["tools"] = [TOOLS[name] for name in case.tools]
    if case.tool_choice is not None:
        body["tool_choice"] = case.tool_choice
    if case.enable_thinking is False:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    if case.json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": case.json_schema},
        }
    return body


def _params(vendor_models: Path, case: Case) -> str:
    src = (vendor_models / "templates" / case.template).read_text(encoding="utf-8")
    templates = _core.ChatTemplates(None, src)
    return templates.chat_params(json.dumps(_body(case)))


def _pieces(text: str) -> Iterator[str]:
    """``text`` in pieces of 1, 2, 3, 4, 1, ... characters (str slices: UTF-8 safe)."""
    at = 0
    for size in itertools.cycle((1, 2, 3, 4)):
        if at >= len(text):
            return
        yield text[at : at + size]
        at += size


def _text(value: str | None) -> str:
    return (value or "").strip()


def _check(where: str, case: Case, message: dict[str, Any]) -> None:
    where = f"{where} (test-chat.cpp:{case.line}, {case.template})"
    assert _text(message.get("content")) == case.content.strip(), where
    assert _text(message.get("reasoning_content")) == case.reasoning_content.strip(), where
    calls = message.get("tool_calls") or []
    assert [c["function"]["name"] for c in calls] == [c.name for c in case.tool_calls], where
    for got, want in zip(calls, case.tool_calls):
        assert json.loads(got["function"]["arguments"]) == json.loads(want.arguments), where
        if want.id is not None:
            assert got.get("id") == want.id, where


class _Accumulated:
    """An assistant message rebuilt from the reader's OpenAI deltas, as a client does."""

    def __init__(self) -> None:
        self.content = ""
        self.reasoning_content = ""
        self.tool_calls: list[dict[str, Any]] = []

    def add(self, diffs: list[dict[str, Any]]) -> None:
        for d in diffs:
            self.content += d.get("content") or ""
            self.reasoning_content += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                i = tc["index"]
                while len(self.tool_calls) <= i:
                    self.tool_calls.append({"id": None, "function": {"name": "", "arguments": ""}})
                call = self.tool_calls[i]
                if tc.get("id"):
                    call["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    call["function"]["name"] = fn["name"]
                call["function"]["arguments"] += fn.get("arguments") or ""

    def message(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "reasoning_content": self.reasoning_content,
            "tool_calls": self.tool_calls,
        }


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_whole_reply(vendor_models: Path, case: Case) -> None:
    reader = _core.ChatReader(_params(vendor_models, case), False, "none")
    out = json.loads(reader.update(case.input, False))
    assert not out["unparsed"], out
    _check("whole", case, out["message"])


@pytest.mark.parametrize("case", STREAMED)
def test_streamed_reply(vendor_models: Path, case: Case) -> None:
    reader = _core.ChatReader(_params(vendor_models, case), True, "none")
    acc = _Accumulated()
    for piece in _pieces(case.input):
        acc.add(json.loads(reader.update(piece, True))["diffs"])
    out = json.loads(reader.update("", False))
    acc.add(out["diffs"])
    assert not out["unparsed"], out
    final = out["message"]
    # the deltas add up to the reader's own final message, exactly
    assert acc.content == (final.get("content") or ""), case.line
    assert acc.reasoning_content == (final.get("reasoning_content") or ""), case.line
    _check("streamed deltas", case, acc.message())
    _check("streamed message", case, final)
