"""A chat turn planned by llama.cpp's own chat layer (``_core.ChatTemplates``: the model's
template in llama.cpp's Jinja engine, llama-server's ``oaicompat_chat_params_parse``):
the prompt, the tool-call grammar and its lazy triggers, preserved tokens, extra stops,
the thinking tags and the parser that reads the reply back (``ChatPlan.message`` whole,
``ChatPlan.deltas`` streamed, both llama-server's ``task_result_state``). Shared by every
protocol that speaks chat (OpenAI chat, Anthropic, Responses, Ollama)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from pyllama import _core
from pyllama.chat import tokenize_chat
from pyllama.server.http.errors import APIError
from pyllama.server.state import ServerState

__all__ = ["ChatPlan", "ChatReader", "ToolCall", "plan_chat"]

log = logging.getLogger("pyllama.server")


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
        out = orjson.loads(self._reader.update(text, partial))
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
    reasoning_format: str  # the server's default (a request's own rides in the parameters)
    grammar: str | None = None  # the tool-call grammar (or the template's for a schema)
    grammar_lazy: bool = False  # free text until a trigger
    trigger_patterns: list[str] = field(default_factory=list)
    trigger_tokens: list[int] = field(default_factory=list)
    preserved: list[int] = field(default_factory=list)  # special tokens written out as text
    stops: list[str] = field(default_factory=list)  # the template's additional stops
    media: _core.MediaPrompt | None = None  # the prompt, when it holds images or audio
    thinking: tuple[str, list[str]] | None = None  # (start tag, end tags) of a thinking block
    generation_prompt: str = ""  # what the prompt adds after the messages
    budget: int = -1  # the reasoning budget llama-server derived (request, else --reasoning-budget)

    def message(self, text: str) -> tuple[dict[str, Any], list[ToolCall]]:
        """The assistant message for a whole reply, and its tool calls."""
        reader = ChatReader(self, stream=False)
        reader._update(text, False)
        msg = reader.whole or reader.message
        return msg, _calls(msg)

    def deltas(self) -> ChatReader:
        return ChatReader(self)


def _tool_choice(choice: Any, tools: Any) -> tuple[Any, Any]:
    """(tool_choice as llama-server reads it, tools): a named function (OpenAI's
    ``{"type": "function", "function": {"name": ...}}``) is that one tool, required."""
    if not isinstance(choice, Mapping):
        return choice, tools
    name = (choice.get("function") or {}).get("name") if choice.get("type") == "function" else None
    if not isinstance(name, str) or not isinstance(tools, list):
        raise APIError(400, "tool_choice must be 'auto', 'none', 'required' or a named function")
    named = [
        t for t in tools if isinstance(t, Mapping) and (t.get("function") or {}).get("name") == name
    ]
    if not named:
        raise APIError(400, f"tool_choice names '{name}', which is not among the tools")
    return "required", named


def plan_chat(
    state: ServerState,
    messages: Any,
    *,
    tools: Any = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    reasoning_format: str | None = None,
    add_generation_prompt: bool = True,
    template_kwargs: Mapping[str, Any] | None = None,
    grammar: str | None = None,
    json_schema: Any = None,
    response_format: Mapping[str, Any] | None = None,
    continue_final: bool | str | None = None,
    extra: Mapping[str, Any] | None = None,
    media: bool = False,
) -> ChatPlan:
    """Render and tokenize a chat as llama-server does; APIError(400) for bad messages or
    tools or a template that refuses them. ``extra``: llama-server body fields the chat
    layer reads (reasoning_budget_tokens, reasoning_effort ...). With ``media`` (marker
    parts in the messages) the tokens are left to the projector (``turn.plan_call``)."""
    model, _ = state.require()
    chat = state.chat
    assert chat is not None
    tool_choice, tools = _tool_choice(tool_choice, tools)
    body: dict[str, Any] = {**(extra or {}), "messages": messages}
    for key, value in (
        ("tools", tools),
        ("tool_choice", tool_choice),
        ("parallel_tool_calls", parallel_tool_calls),
        ("reasoning_format", reasoning_format),
        ("chat_template_kwargs", dict(template_kwargs) if template_kwargs else None),
        ("grammar", grammar),
        ("json_schema", json_schema),
        ("response_format", dict(response_format) if response_format else None),
    ):
        if value is not None:
            body[key] = value
    if not add_generation_prompt:
        body["add_generation_prompt"] = False
    if continue_final is not None:
        body["continue_final_message"] = continue_final
    try:
        params_json = chat.chat_params(orjson.dumps(body).decode())
    except (ValueError, TypeError) as e:  # llama-server: 400
        raise APIError(400, str(e)) from e
    except RuntimeError as e:  # a template that raises or fails: the conversation it refuses
        raise APIError(400, str(e)) from e
    params = orjson.loads(params_json)
    prompt: str = params["prompt"]
    try:
        preserved, patterns, trigger_tokens = _core.chat_sampling(model, params_json)
    except (ValueError, RuntimeError) as e:
        raise APIError(500, str(e), "server_error") from e
    chat_grammar = params.get("grammar") if params.get("grammar_type") == "tool_calls" else None
    ends = params.get("reasoning_budget_end_tags") or []
    thinking = (params.get("reasoning_budget_start_tag") or "", ends) if ends else None
    msgs = messages if isinstance(messages, list) else []
    plan = ChatPlan(
        prompt=prompt,
        tokens=[]
        if media
        else tokenize_chat(model, [m for m in msgs if isinstance(m, Mapping)], prompt),
        params_json=params_json,
        reasoning_format=state.settings.reasoning_format,
        grammar=chat_grammar,
        grammar_lazy=bool(params.get("grammar_lazy")) and chat_grammar is not None,
        trigger_patterns=list(patterns),
        trigger_tokens=list(trigger_tokens),
        preserved=list(preserved),
        stops=[s for s in params.get("stop") or [] if isinstance(s, str)],
        thinking=thinking,
        generation_prompt=params.get("generation_prompt") or "",
        budget=int(params.get("reasoning_budget_tokens", -1)),
    )
    return plan
