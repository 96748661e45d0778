"""A chat turn planned by llama.cpp's chat layer: an OpenAI chat body (messages, tools,
tool_choice, response_format, reasoning fields) through llama-server's request parse to
the prompt, the tool-call or output grammar and its lazy triggers, preserved tokens, extra
stops, the thinking tags and the parser that reads the reply back (``ChatPlan.message``
whole, ``ChatPlan.deltas`` streamed: llama-server's ``task_result_state``). The library
(``Llama``, ``AsyncLlama``) and every protocol of the server plan through here."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pyllama import _core
from pyllama.chat.template import ChatTemplate, ChatTemplateError
from pyllama.chat.tokens import tokenize_chat

__all__ = ["ChatPlan", "ChatReader", "ToolCall", "named_tool_choice", "plan_chat"]

log = logging.getLogger("pyllama.chat")


class ToolCall(NamedTuple):
    """One call of a reply, as the protocols write it out."""

    id: str
    name: str
    arguments: str  # JSON text, as the OpenAI API carries it


def _calls(message: Mapping[str, Any]) -> list[ToolCall]:
    return [
        ToolCall(c.get("id") or "", c["function"]["name"], c["function"].get("arguments") or "")
        for c in message.get("tool_calls") or []
    ]


class ChatReader:
    """A reply read as it streams: text in, OpenAI-style message deltas out
    (reasoning_content, content, tool_calls), as llama-server emits them."""

    def __init__(self, plan: ChatPlan, stream: bool = True) -> None:
        self._reader = _core.ChatReader(plan.params_json, stream, plan.reasoning_format)
        self.message: dict[str, Any] = {"role": "assistant", "content": None}
        self.whole: dict[str, Any] | None = None  # the whole answer's message, once finished

    def _update(self, text: str, partial: bool) -> list[dict[str, Any]]:
        out = json.loads(self._reader.update(text, partial))
        self.message = out["message"]
        self.whole = out.get("whole")
        if out["unparsed"]:
            log.warning("the model's reply does not parse as its chat format; sent as content")
        return [d for d in out["diffs"] if d]

    @property
    def n_calls(self) -> int:
        return len(self.message.get("tool_calls") or [])

    def feed(self, text: str) -> list[dict[str, Any]]:
        return self._update(text, True)

    def finish(self) -> list[dict[str, Any]]:
        return self._update("", False)


@dataclass
class ChatPlan:
    """What to generate for a chat request and how to read the output."""

    prompt: str
    tokens: list[int]
    params_json: str  # llama-server's task parameters for this chat (ChatReader reads them)
    reasoning_format: str  # the template's default (a request's own rides in the parameters)
    grammar: str | None = None  # the tool-call grammar (or the template's for a schema)
    grammar_lazy: bool = False  # free text until a trigger
    trigger_patterns: list[str] = field(default_factory=list)
    trigger_tokens: list[int] = field(default_factory=list)
    preserved: list[int] = field(default_factory=list)  # special tokens written out as text
    stops: list[str] = field(default_factory=list)  # the template's additional stops
    media: _core.MediaPrompt | None = None  # the prompt, when it holds images or audio
    thinking: tuple[str, list[str]] | None = None  # (start tag, end tags) of a thinking block
    generation_prompt: str = ""  # what the prompt adds after the messages

    def message(self, text: str) -> tuple[dict[str, Any], list[ToolCall]]:
        """The assistant message for a whole reply, and its tool calls."""
        reader = ChatReader(self, stream=False)
        reader._update(text, False)
        msg = reader.whole or reader.message
        return msg, _calls(msg)

    def deltas(self) -> ChatReader:
        return ChatReader(self)


def named_tool_choice(choice: Any, tools: Any) -> tuple[Any, Any]:
    """(tool_choice as llama-server reads it, tools): a named function (OpenAI's
    ``{"type": "function", "function": {"name": ...}}``) is that one tool, required."""
    if not isinstance(choice, Mapping):
        return choice, tools
    name = (choice.get("function") or {}).get("name") if choice.get("type") == "function" else None
    if not isinstance(name, str) or not isinstance(tools, list):
        raise ChatTemplateError(
            "tool_choice must be 'auto', 'none', 'required' or a named function"
        )
    named = [
        t for t in tools if isinstance(t, Mapping) and (t.get("function") or {}).get("name") == name
    ]
    if not named:
        raise ChatTemplateError(f"tool_choice names '{name}', which is not among the tools")
    return "required", named


def plan_chat(
    template: ChatTemplate, model: _core.Model, body: Mapping[str, Any], *, media: bool = False
) -> ChatPlan:
    """``body``: an OpenAI chat body. ChatTemplateError (a ValueError) for what llama-server
    refuses. With ``media`` (marker parts in the messages) the tokens are left to the
    projector."""
    choice, tools = named_tool_choice(body.get("tool_choice"), body.get("tools"))
    body = {**body, **({"tool_choice": choice, "tools": tools} if choice is not None else {})}
    params_json = template.params(body)
    params = json.loads(params_json)
    prompt: str = params["prompt"]
    try:
        preserved, patterns, trigger_tokens = _core.chat_sampling(model, params_json)
    except (ValueError, RuntimeError) as e:
        raise RuntimeError(f"the template's grammar triggers: {e}") from e
    grammar = params.get("grammar") if params.get("grammar_type") == "tool_calls" else None
    ends = params.get("reasoning_budget_end_tags") or []
    messages = body.get("messages")
    msgs = [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else []
    return ChatPlan(
        prompt=prompt,
        tokens=[] if media else tokenize_chat(model, msgs, prompt),
        params_json=params_json,
        reasoning_format=template.reasoning_format,
        grammar=grammar,
        grammar_lazy=bool(params.get("grammar_lazy")) and grammar is not None,
        trigger_patterns=list(patterns),
        trigger_tokens=list(trigger_tokens),
        preserved=list(preserved),
        stops=[s for s in params.get("stop") or [] if isinstance(s, str)],
        thinking=(params.get("reasoning_budget_start_tag") or "", ends) if ends else None,
        generation_prompt=params.get("generation_prompt") or "",
    )
