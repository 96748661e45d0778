"""A chat call of llama-cpp-python's API planned through the one chat path
(``pyllama.chat``, llama.cpp's chat layer, as pyllama-server plans it): the legacy
``functions``/``function_call`` as tools, ``response_format`` and a user's grammar, to
prompt tokens, the grammar the sampler takes and the reader that turns the generated text
back into a message.

Shared by ``Llama`` (one context) and the engine-backed ``AsyncLlama``/``BatchedLlama``.

A named ``tool_choice`` on a template that writes no tool calls (llama.cpp's chat layer then
renders no tools) is answered as llama-cpp-python answers it: the arguments generated under
the tool's parameter schema and returned as that tool's call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyllama import _core
from pyllama.chat import ChatPlan as CorePlan
from pyllama.chat import ChatReader, ChatTemplate
from pyllama.chat import plan_chat as plan_body
from pyllama.chat.prefill import prefill_tokens
from pyllama.llama.sampler_chain import ChatGrammar

__all__ = ["ChatPlan", "plan_chat"]


@dataclass
class ChatPlan:
    core: CorePlan
    grammar: Any  # the chat layer's ChatGrammar, or the user's own GBNF text
    named: str | None = None  # a named tool_choice: llama-cpp-python's legacy function_call too
    schema_call: bool = False  # the named tool's arguments are the whole reply (see above)

    @property
    def prompt(self) -> str:
        return self.core.prompt

    @property
    def tokens(self) -> list[int]:
        return self.core.tokens

    @property
    def preserved(self) -> list[int]:
        return self.core.preserved

    @property
    def stops(self) -> list[str]:
        return self.core.stops

    def message(self, text: str) -> tuple[dict[str, Any], bool]:
        """The assistant message for the whole generated text, and whether it calls tools."""
        if self.schema_call:
            assert self.named is not None
            call = {"name": self.named, "arguments": text}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"call__{self.named}", "type": "function", "function": call}],
                "function_call": call,
            }
            return message, True
        message, calls = self.core.message(text)
        message = {"role": "assistant", **{k: v for k, v in message.items() if k != "role"}}
        if calls and self.named is not None:
            message["function_call"] = {"name": calls[0].name, "arguments": calls[0].arguments}
        return message, bool(calls)

    def reader(self) -> ChatReader | SchemaCallReader:
        if self.schema_call:
            assert self.named is not None
            return SchemaCallReader(self.named)
        return self.core.deltas()


class SchemaCallReader:
    """A streamed schema call (``ChatPlan.schema_call``): every piece is argument text."""

    n_calls = 1

    def __init__(self, name: str) -> None:
        self._name: str | None = name

    def feed(self, text: str) -> list[dict[str, Any]]:
        call: dict[str, Any] = {"index": 0, "function": {"arguments": text}}
        if self._name is not None:  # the first delta names the call
            call = {"index": 0, "id": f"call__{self._name}", "type": "function",
                    "function": {"name": self._name, "arguments": text}}  # fmt: skip
            self._name = None
        return [{"tool_calls": [call]}] if text or "id" in call else []

    def finish(self) -> list[dict[str, Any]]:
        return []


def _as_tools(
    functions: Sequence[Mapping[str, Any]] | None,
    function_call: Any,
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: Any,
) -> tuple[Any, Any]:
    """The legacy ``functions``/``function_call`` as ``tools``/``tool_choice``."""
    if functions is not None:
        if tools is not None:
            raise ValueError("pass either functions or tools, not both")
        tools = [{"type": "function", "function": f} for f in functions]
        if isinstance(function_call, Mapping):
            tool_choice = {"type": "function", "function": {"name": function_call.get("name")}}
        elif function_call is not None:
            tool_choice = function_call
    return tools, tool_choice


def plan_chat(
    model: _core.Model,
    template: ChatTemplate,
    messages: Any,
    *,
    functions: Sequence[Mapping[str, Any]] | None = None,
    function_call: Any = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: Any = None,
    response_format: Mapping[str, Any] | None = None,
    grammar: str | None = None,
) -> ChatPlan:
    """Raises ValueError for bad messages, tools, tool_choice or response_format."""
    tools, tool_choice = _as_tools(functions, function_call, tools, tool_choice)
    if response_format is not None and grammar is not None:
        raise ValueError("pass either grammar or response_format, not both")
    if not isinstance(messages, (list, tuple)):
        raise ValueError("'messages' must be an array of message objects")
    body: dict[str, Any] = {"messages": list(messages)}
    if tools:
        body["tools"] = list(tools)
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if response_format is not None:
        body["response_format"] = dict(response_format)
    if grammar is not None:
        body["grammar"] = grammar  # llama-server's: no grammar beside tools
    named = None
    if isinstance(tool_choice, Mapping):
        named = (tool_choice.get("function") or {}).get("name")
    core = plan_body(template, model, body)
    chosen: Any = grammar
    if named is not None and core.grammar is None:  # the template writes no tool calls
        tool = next(t for t in body["tools"] if (t.get("function") or {}).get("name") == named)
        schema = tool["function"].get("parameters") or {"type": "object"}
        chosen = _core.json_schema_to_grammar(json.dumps(schema))
        return ChatPlan(core=core, grammar=chosen, named=named, schema_call=True)
    if core.grammar is not None:
        lazy = core.grammar_lazy
        chosen = ChatGrammar(
            core.grammar,
            tuple(core.trigger_patterns) if lazy else (),
            tuple(core.trigger_tokens) if lazy else (),
            () if lazy else tuple(prefill_tokens(model, core.generation_prompt)),
        )
    return ChatPlan(core=core, grammar=chosen, named=named)
