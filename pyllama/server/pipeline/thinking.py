"""Whether a chat template supports thinking, as llama-server decides it at load
(``common_chat_templates_support_enable_thinking``): with ``--reasoning auto`` (the default)
a template that does gets ``enable_thinking=true``, any other ``false``; ``--reasoning on``
passes true and ``off`` false whatever the template (llama-server puts them in the default
template kwargs).

llama.cpp answers from its specialized parsers for the template families it recognises by
their source, and otherwise from its differential analysis (``chat-diff-analyzer.cpp``):
a reasoning text given to an assistant turn is rendered followed by a marker, or the
generation prompt with thinking on and off differs by markers at its end. This module
keeps the same two steps: the families' fixed answers, then the two renderings compared
the same way (a simplification of the analyzer's segment diff, which finds the same
answer for the templates in use)."""

from __future__ import annotations

import re
from functools import lru_cache

from pyllama.chat import BuiltinTemplate, ChatTemplate, ChatTemplateError

__all__ = ["default_enable_thinking", "supports_thinking"]

# (every string the source holds, none it may hold, supports thinking): the specialized
# parsers of common_chat_try_specialized_template, in its order
_FAMILIES: list[tuple[tuple[str, ...], tuple[str, ...], bool]] = [
    (("[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]"), ("[CALL_ID]",), True),  # ministral 3
    (("<|channel|>",), (), True),  # gpt-oss
    (("<atem:function_calls>", "<|eom|>"), (), True),  # muse glimmer
    ((">>>all", ">>>${recipient}"), (), False),  # functionary v3.2
    (("<|tool_calls_section_begin|>", "<|tool_call_begin|>"), (), True),  # kimi k2
    (("<|open|>", "<|close|>", "<|end_of_msg|>"), (), True),  # kimi k3
    (("<role>ASSISTANT</role>", "<arg_key>"), (), True),  # ling 3
    (("<|START_TEXT|>", "<|START_ACTION|>"), (), True),  # cohere2 moe
    (("<|tool_list_start|>", "<|tool_list_end|>"), (), True),  # lfm2
    (("List of tools: [",), ("<|tool_list_start|>",), True),  # lfm2 without list tokens
    (("<|role_sep|>", "<|message_sep|>"), ("<|function_call|>",), False),  # gigachat v3
    (("]<]minimax[>[", "<tool_call>", "<invoke name="), (), True),  # minimax m3
    (("'<|tool_call>call:'",), (), True),  # gemma 4
    (("Tool usage guidelines:", '<function name="', '<param name="'), (), True),  # minicpm 5
]

_MARKER = re.compile(r"<[^<>]*>|\[[^\[\]]*\]")
_USER = {"role": "user", "content": "Hello, please help me."}
_ANSWER = "I can help you with that."
_REASONING = "I need to think about this carefully."


def _family(source: str) -> bool | None:
    for needed, excluded, answer in _FAMILIES:
        if all(s in source for s in needed) and not any(s in source for s in excluded):
            return answer
    calls = "function_calls" in source or "tool_calls" in source
    if "dsml_token" in source and "DSML" in source and calls:  # deepseek v3.2
        return True
    qwen3_coder = ("<tool_call>", "<function=", "<parameter=")
    tight = "'<tool_call><function=' ~ tool_call.name ~ '>'"  # no newline between tags
    if all(s in source for s in qwen3_coder) and tight not in source:
        return "<think>" in source
    return None


def _render(template: ChatTemplate, messages: list[dict[str, str]], gen: bool, on: bool) -> str:
    try:
        return template.render(messages, add_generation_prompt=gen, enable_thinking=on)
    except ChatTemplateError:
        return ""


def _only_markers(text: str, count: int | None = None) -> bool:
    """``text`` is markers (``<...>``, ``[...]``) and whitespace only (``count`` of them)."""
    found = _MARKER.findall(text)
    if not found or _MARKER.sub("", text).strip():
        return False
    return count is None or len(found) == count


def _reasoning_rendered(template: ChatTemplate) -> bool:
    """An assistant turn's reasoning is rendered followed by a marker (its end tag)."""
    turn = {"role": "assistant", "content": _ANSWER}
    plain = _render(template, [_USER, turn], False, True)
    full = _render(template, [_USER, {**turn, "reasoning_content": _REASONING}], False, True)
    if _REASONING in plain or _REASONING not in full:
        return False
    after = full[full.index(_REASONING) + len(_REASONING) :]
    return _MARKER.match(after.lstrip()) is not None


def _diff(a: str, b: str) -> tuple[str, str]:
    """What differs between ``a`` and ``b`` once their common start and end are cut."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    q = 0
    while q < min(len(a), len(b)) - p and a[-1 - q] == b[-1 - q]:
        q += 1
    return a[p : len(a) - q], b[p : len(b) - q]


def _switch_renders_tags(template: ChatTemplate) -> bool:
    """The generation prompt with thinking off (a) and on (b) differs at its very end: b
    adds a start tag, or a adds a closed block (the analyzer wants the rendering to end
    with the added text, trailing whitespace included), or one adds two markers after
    the other's last 64 characters."""
    a = _render(template, [_USER], True, False)
    b = _render(template, [_USER], True, True)
    if not a or not b or a == b:
        return False
    left, right = _diff(a, b)
    if not left.strip():
        return bool(right.strip()) and b.endswith(right.strip())
    if not right.strip():
        return a.endswith(left.strip())
    for base, extended in ((b, a), (a, b)):
        anchor = base[-64:]
        at = extended.rfind(anchor)
        if at < 0 or at + len(anchor) >= len(extended):
            continue
        extra = extended[at + len(anchor) :].strip()
        if extra and _only_markers(extra, 2):
            return True
    return False


@lru_cache(maxsize=8)
def _supports(template: ChatTemplate) -> bool:
    family = _family(template.source)
    if family is not None:
        return family
    return _reasoning_rendered(template) or _switch_renders_tags(template)


def supports_thinking(template: ChatTemplate | None, jinja: bool = True) -> bool:
    """llama-server's ``template_supports_thinking``: false without Jinja (``--no-jinja``)."""
    if template is None or not jinja or isinstance(template, BuiltinTemplate):
        return False
    return _supports(template)


def default_enable_thinking(reasoning: str, template: ChatTemplate | None, jinja: bool) -> bool:
    """What the template receives as ``enable_thinking`` when a request does not say:
    ``--reasoning on`` true, ``off`` false, ``auto`` whether the template supports it."""
    if reasoning == "on":
        return True
    if reasoning == "off":
        return False
    return supports_thinking(template, jinja)
