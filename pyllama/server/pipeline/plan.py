"""A chat turn planned: messages to prompt tokens through the template, with the tools
(template context, grammar, call format) and reasoning settings that decide how the reply
is read back (``ChatPlan.deltas`` streams it, see ``deltas``). Shared by every protocol
that speaks chat (OpenAI chat, Anthropic, Responses, Ollama)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyllama import _core
from pyllama.chat import BuiltinTemplate, ChatTemplateError, tokenize_chat, validate_messages
from pyllama.reasoning import (
    END,
    FORMATS,
    START,
    close_thinking,
    opening,
    split_reasoning,
    thinking_tags,
)
from pyllama.server.http.errors import APIError
from pyllama.server.pipeline.deltas import ChatDeltas
from pyllama.server.pipeline.thinking import default_enable_thinking
from pyllama.server.state import ServerState
from pyllama.template_caps import template_messages
from pyllama.toolcalls import (
    ToolCall,
    ToolFormat,
    detect_format,
    generic_history,
    generic_system_prompt,
    parse_tool_calls,
    tool_choice_mode,
    tool_grammar,
    validate_tools,
    with_system_prompt,
)

__all__ = ["ChatPlan", "plan_chat"]


@dataclass
class ChatPlan:
    """What to generate for a chat request and how to read the output."""

    messages: list[dict[str, Any]]
    prompt: str
    tokens: list[int]
    grammar: str | None = None
    trigger_patterns: list[str] = field(
        default_factory=list
    )  # lazy grammar: free text until one matches
    preserved: list[int] = field(default_factory=list)  # special tokens written out as text
    tools: ToolFormat | None = None
    media: _core.MediaPrompt | None = None  # the prompt, when it holds images or audio
    reasoning: str = "none"  # effective reasoning format; "none": left in the content
    opened: str = ""  # what the prompt put from an opened think block's tag on ("<think>\n")
    thinking: tuple[str, str] | None = None  # the template's thinking tags (start, end)
    # the messages rendered without the generation prompt (only a reasoning budget needs it)
    render_bare: Callable[[], str] | None = None

    def message(self, text: str) -> tuple[dict[str, Any], list[ToolCall]]:
        """The assistant message for a whole reply, and its tool calls."""
        # left in the content, a reply the prompt opened starts with the prompt's tag
        reasoning, content = ("", self.opened + text)
        if self.reasoning != "none":
            reasoning, content = split_reasoning(text, self.opened)
        calls: list[ToolCall] = []
        if self.tools is not None:
            content, calls = parse_tool_calls(self.tools, content)
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": None if calls and not content else content,
        }
        if reasoning:
            msg["reasoning_content"] = reasoning
        if calls:
            msg["tool_calls"] = [c.to_openai() for c in calls]
        return msg, calls

    def generation_prompt(self) -> str:
        """llama.cpp's: what the prompt adds after the messages (the budget's prefill)."""
        if self.render_bare is None:
            return ""
        return self.prompt[_common_prefix(self.render_bare(), self.prompt) :]

    def deltas(self) -> ChatDeltas:
        return ChatDeltas(self)


def _tool_choice(choice: Any, functions: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """("auto" | "required" | "none", the functions allowed); APIError(400) otherwise."""
    try:
        mode, allowed, _ = tool_choice_mode(choice, functions)
    except ValueError as e:
        raise APIError(400, str(e)) from e
    return mode, allowed


def _single_special(model: _core.Model, text: str) -> int | None:
    toks = model.tokenize(text, False, True)
    if len(toks) == 1 and model.tokenize(text, False, False) != toks:
        return toks[0]
    return None


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
    has_grammar: bool = False,
    allow_empty: bool = False,
    continue_final: bool | None = None,
    media: bool = False,
) -> ChatPlan:
    """Render and tokenize a chat; raises APIError(400) for bad messages, tools or template
    failures. With ``media`` (markers in the messages) the tokens are left to the
    projector (``turn.plan_call``)."""
    model, _ = state.require()
    template = state.template
    assert template is not None
    try:
        msgs = validate_messages(messages, allow_empty)
    except ValueError as e:
        raise APIError(400, str(e)) from e
    prefill = _continuation(msgs, messages, continue_final, add_generation_prompt, state)
    if prefill is not None:  # render the turns before it, then the assistant's start
        msgs, add_generation_prompt = msgs[:-1], True
    fmt: ToolFormat | None = None
    grammar: str | None = None
    triggers: list[str] = []
    render_tools = None
    if not state.settings.jinja:  # llama-server's words: tools need a Jinja template
        if tools:
            raise APIError(400, "tools param requires --jinja flag")
        if tool_choice not in (None, "auto"):
            raise APIError(400, "tool_choice param requires --jinja flag")
    if tools:
        try:
            functions = validate_tools(tools)
        except ValueError as e:
            raise APIError(400, str(e)) from e
        mode, functions = _tool_choice(tool_choice, functions)
        if mode != "none":
            if has_grammar:
                raise APIError(400, "Cannot use custom grammar constraints with tools.")
            fmt = detect_format(template.source)
            parallel = bool(parallel_tool_calls)
            required = mode == "required"
            try:
                grammar, triggers = tool_grammar(
                    fmt, functions, required, parallel, _core.json_schema_to_grammar
                )
            except (ValueError, RuntimeError) as e:
                raise APIError(400, f"tools: {e}") from e
            if fmt.generic:
                msgs = with_system_prompt(
                    msgs, generic_system_prompt(functions, required, parallel)
                )
            else:
                render_tools = [{"type": "function", "function": f} for f in functions]
    if detect_format(template.source).generic:
        msgs = generic_history(msgs)
    thinking = state.settings.reasoning  # --reasoning on|off|auto
    extra = _thinking_context({**state.settings.chat_template_kwargs, **(template_kwargs or {})})
    # llama-server's default: on/off as asked, auto as the template supports thinking
    extra.setdefault(
        "enable_thinking", default_enable_thinking(thinking, template, state.settings.jinja)
    )
    shown = _as_llama_cpp_shows(template, msgs)
    try:
        prompt = template.render(
            shown, add_generation_prompt=add_generation_prompt, tools=render_tools, **extra
        )
    except ChatTemplateError as e:
        raise APIError(400, str(e)) from e
    if prefill is not None:
        prompt += prefill
        msgs = [*msgs, {"role": "assistant", "content": prefill}]  # tokenized as text
    tags = thinking_tags(template.source)
    if thinking == "off" and tags is not None and add_generation_prompt:
        prompt = close_thinking(prompt, tags)
    rf = reasoning_format or state.settings.reasoning_format
    if rf not in FORMATS:
        raise APIError(400, f"reasoning_format must be one of {', '.join(FORMATS)}")
    # the tags the reply parser knows; --skip-chat-parsing leaves everything in the content
    thinks = tags == (START, END) and not state.settings.skip_chat_parsing

    def render_bare() -> str:
        try:
            return template.render(shown, add_generation_prompt=False, tools=render_tools, **extra)
        except ChatTemplateError as e:
            raise APIError(400, str(e)) from e

    plan = ChatPlan(
        messages=msgs,
        prompt=prompt,
        tokens=[] if media else tokenize_chat(model, msgs, prompt),
        grammar=grammar,
        tools=None if state.settings.skip_chat_parsing else fmt,
        reasoning=rf if thinks else "none",
        opened=opening(prompt) if thinks else "",
        thinking=tags,
        render_bare=render_bare if tags is not None else None,
    )
    markers = [m for m in (fmt.start, fmt.end) if m] if fmt is not None else []
    if thinks:
        markers += ["<think>", "</think>"]
    for m in markers:
        tok = _single_special(model, m)
        if tok is not None:
            plan.preserved.append(tok)
    plan.trigger_patterns = triggers
    return plan


def _as_llama_cpp_shows(template: Any, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as llama.cpp hands them to a Jinja template (content parts and
    tool-call arguments shaped by the template's capabilities); a built-in format gets
    them as they are."""
    if isinstance(template, BuiltinTemplate):
        return msgs
    try:
        return template_messages(template.source, msgs)
    except ValueError as e:
        raise APIError(400, str(e)) from e


def _thinking_context(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The template kwargs with what llama.cpp derives from them: ``preserve_reasoning``
    (on unless --no-reasoning-preserve or the request says otherwise) sets
    ``preserve_thinking`` and its opposites ``clear_thinking``, ``truncate_history_thinking``,
    ``drop_thinking``; ``reasoning_effort`` also sets ``reasoning_strength``. A kwarg given
    by name wins over a derived one, as in llama.cpp's render."""
    derived: dict[str, Any] = {}
    kwargs = {"preserve_reasoning": True, **kwargs}
    keep = kwargs["preserve_reasoning"]
    if isinstance(keep, bool):
        derived = {
            "preserve_thinking": keep,
            "clear_thinking": not keep,
            "truncate_history_thinking": not keep,
            "drop_thinking": not keep,
        }
    effort = kwargs.get("reasoning_effort")
    if isinstance(effort, str) and effort:
        derived["reasoning_strength"] = effort
    return {**derived, **kwargs}


def _continuation(
    msgs: list[dict[str, Any]],
    raw: Any,
    continue_final: bool | None,
    add_generation_prompt: bool,
    state: ServerState,
) -> str | None:
    """The text of a final assistant message the reply continues, as llama-server: asked
    with ``continue_final_message``, or implied (``--prefill-assistant``, on by default)
    when the conversation ends with an assistant message. None: a new turn."""
    last = msgs[-1] if msgs else None
    if continue_final is None:
        if not (state.settings.prefill_assistant and last and last["role"] == "assistant"):
            return None
        if len(msgs) >= 2 and msgs[-2]["role"] == "assistant":
            raise APIError(400, "Cannot have 2 or more assistant messages at the end of the list.")
    elif not continue_final:
        return None
    elif add_generation_prompt:
        raise APIError(
            400, "Cannot set both add_generation_prompt and continue_final_message to true."
        )
    if last is None or last["role"] != "assistant":
        raise APIError(400, "continue_final_message needs a final assistant message")
    if last.get("tool_calls"):
        raise APIError(400, "Cannot continue an assistant message that contains tool calls.")
    parts = raw[-1].get("content")
    if isinstance(parts, list):  # text parts are joined by blank lines, as llama.cpp renders them
        return "\n\n".join(p["text"] for p in parts)
    return str(last.get("content") or "")


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
