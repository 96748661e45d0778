"""A chat call of llama-cpp-python's API planned: messages, tools and ``response_format``
to prompt tokens and a grammar, and the reader that turns the generated text back into
a message (tool calls parsed by the template family's format, as pyllama-server does).

Shared by ``Llama`` (one context) and the engine-backed ``AsyncLlama``/``BatchedLlama``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyllama import _core
from pyllama.chat import ChatTemplate, tokenize_chat, validate_messages
from pyllama.sampling import grammar_for_response_format
from pyllama.toolcalls import (
    ToolCall,
    ToolFormat,
    ToolStream,
    detect_format,
    generic_history,
    generic_system_prompt,
    parse_tool_calls,
    template_context,
    tool_choice_mode,
    tool_grammar,
    validate_tools,
    with_system_prompt,
)

__all__ = ["ChatPlan", "plan_chat"]


@dataclass
class ChatPlan:
    prompt: str
    tokens: list[int]
    grammar: str | None = None
    triggers: list[str] = field(default_factory=list)  # lazy grammar: free text until one matches
    tools: ToolFormat | None = None  # read calls back in this format
    named: str | None = None  # a named tool_choice: llama-cpp-python's legacy function_call too
    preserved: list[int] = field(default_factory=list)  # special tokens written out as text

    def message(self, text: str) -> tuple[dict[str, Any], bool]:
        """The assistant message for the whole generated text, and whether it calls tools."""
        if self.tools is None:
            return {"role": "assistant", "content": text}, False
        content, calls = parse_tool_calls(self.tools, text)
        if not calls:
            return {"role": "assistant", "content": content}, False
        message: dict[str, Any] = {
            "role": "assistant",
            "content": content or None,
            "tool_calls": [c.to_openai() for c in calls],
        }
        if self.named is not None:
            message["function_call"] = {"name": calls[0].name, "arguments": calls[0].arguments}
        return message, True

    def reader(self) -> ChatReader:
        return ChatReader(self)


class ChatReader:
    """Streaming: text deltas in, OpenAI ``delta`` objects out."""

    def __init__(self, plan: ChatPlan) -> None:
        self.stream = ToolStream(plan.tools) if plan.tools is not None else None
        self.n_calls = 0

    def _deltas(self, content: str, calls: list[ToolCall]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"content": content}] if content else []
        for call in calls:
            out.append({"tool_calls": [call.to_openai(index=self.n_calls)]})
            self.n_calls += 1
        return out

    def feed(self, text: str) -> list[dict[str, Any]]:
        if self.stream is None:
            return [{"content": text}] if text else []
        return self._deltas(*self.stream.feed(text))

    def finish(self) -> list[dict[str, Any]]:
        if self.stream is None:
            return []
        return self._deltas(*self.stream.finish())


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
    msgs = validate_messages(messages)
    tools, tool_choice = _as_tools(functions, function_call, tools, tool_choice)
    rf_grammar = grammar_for_response_format(response_format)
    if rf_grammar is not None and grammar is not None:
        raise ValueError("pass either grammar or response_format, not both")
    fmt = detect_format(template.source)
    plan_grammar = rf_grammar or grammar
    triggers: list[str] = []
    render_tools = None
    read_as: ToolFormat | None = None
    named = None
    if tools:
        mode, allowed, named = tool_choice_mode(tool_choice, validate_tools(tools))
        if mode != "none":
            if plan_grammar is not None:
                raise ValueError("tools cannot be combined with a grammar or a response_format")
            required = mode == "required"
            tg, triggers = tool_grammar(fmt, allowed, required, False, _core.json_schema_to_grammar)
            plan_grammar = tg or None
            read_as = fmt
            if fmt.generic:
                msgs = with_system_prompt(msgs, generic_system_prompt(allowed, required, False))
            else:
                render_tools = [{"type": "function", "function": f} for f in allowed]
    if fmt.generic:
        msgs = generic_history(msgs)
    extra = template_context(fmt, render_tools or [])
    prompt = template.render(msgs, add_generation_prompt=True, tools=render_tools, **extra)
    preserved = []
    for marker in (read_as.start, read_as.end) if read_as is not None else ():
        toks = model.tokenize(marker, False, True) if marker else []
        if len(toks) == 1 and model.tokenize(marker, False, False) != toks:
            preserved.append(toks[0])  # a special token: the reader needs its text
    return ChatPlan(
        prompt=prompt,
        tokens=tokenize_chat(model, msgs, prompt),
        grammar=plan_grammar,
        triggers=triggers,
        tools=read_as,
        named=named,
        preserved=preserved,
    )
