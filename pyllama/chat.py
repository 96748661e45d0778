"""Chat templates from model files, rendered in a sandbox.

A GGUF's ``tokenizer.chat_template`` is untrusted input: it is rendered only by
``jinja2.sandbox.ImmutableSandboxedEnvironment`` (no attribute escapes such as
``__globals__``, no mutation of the messages we pass in), with the helpers Hugging Face
templates expect (``raise_exception``, ``tojson``, ``strftime_now``) and what llama.cpp's
own Jinja engine accepts beyond Jinja (``{% generation %}`` tags, ``list.append`` and
``list.pop``, ``None``/undefined ``+`` a string as the string), a bound on
the size of what a render may produce (the output and any string or list that ``*`` or
``+`` builds) and one on the time a render may take (a loop that produces nothing).
"""

from __future__ import annotations

import json
import operator
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = [
    "CHATML",
    "BuiltinTemplate",
    "ChatTemplate",
    "ChatTemplateError",
    "TextParts",
    "make_template",
    "tokenize_chat",
    "validate_messages",
]

DEFAULT_MAX_OUTPUT = 4 * 1024 * 1024  # characters a single render may produce
# seconds a single render may take: real templates render in milliseconds, and the render
# runs on the server's event loop, so a runaway one must be cut short well before clients
# notice
DEFAULT_MAX_SECONDS = 1.0
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

# ChatML: the fallback when a model carries no template (as llama-server's default)
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ChatTemplateError(ValueError):
    """The template is invalid, unsafe, raised an exception, or produced too much."""


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(f"chat template raised: {message}")


def _tojson(
    value: Any,
    indent: int | None = None,
    separators: Any = None,
    sort_keys: bool = False,
    ensure_ascii: bool = False,
) -> str:
    # Same signature and output as transformers' tojson (not jinja2's HTML-escaping one).
    return json.dumps(
        value,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        default=_json_default,
    )


def _json_default(value: Any) -> Any:
    # jinja2 filters such as map() yield generators; transformers' templates tojson them
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


_SIZED = (str, bytes, list, tuple)


class _GenerationTags(Extension):
    """``{% generation %}`` and ``{% endgeneration %}`` (transformers marks the assistant's
    tokens with them) render nothing, each on its own, as llama.cpp's parser reads them."""

    tags = {"generation", "endgeneration"}  # noqa: RUF012 - jinja2 declares it a set

    def parse(self, parser: Any) -> list[Any]:
        next(parser.stream)
        return []


def _null(value: Any) -> bool:
    return value is None or isinstance(value, jinja2.Undefined)


def _thaw(value: Any) -> Any:
    """A copy of the plain lists and dicts in a render's inputs: a template may append to
    and pop from a list (as in llama.cpp, which renders a copy), never the caller's."""
    if type(value) is list:
        return [_thaw(v) for v in value]
    if type(value) is dict:
        return {k: _thaw(v) for k, v in value.items()}
    if type(value) is tuple:
        return tuple(_thaw(v) for v in value)
    return value


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The sandbox with ``*``, ``**`` and ``+`` checked: none may build a string or list
    longer than ``max_output``, and ``**`` takes no exponent past 64 (``10**10**10``
    would run for ever inside one operation, where no time bound can stop it)."""

    intercepted_binops = frozenset({"*", "**", "+"})
    max_output = DEFAULT_MAX_OUTPUT

    def getattr(self, obj: Any, attribute: str) -> Any:
        # llama.cpp's lists have append (which returns the list) and pop; the inputs are
        # copies (_thaw), and a probe's recording list (a subclass) stays immutable
        if type(obj) is list and attribute in ("append", "pop"):
            return self._append(obj) if attribute == "append" else obj.pop
        return super().getattr(obj, attribute)

    def _append(self, items: list[Any]) -> Any:
        def append(value: Any) -> list[Any]:
            if len(items) >= self.max_output:
                raise ChatTemplateError(f"chat template list exceeds {self.max_output} items")
            items.append(value)
            return items

        return append

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        if op == "+":  # llama.cpp: None or undefined next to a string is the empty string
            if isinstance(left, str) and _null(right):
                right = ""
            elif isinstance(right, str) and _null(left):
                left = ""
        if op == "**":
            if isinstance(right, (int, float)) and abs(right) > 64:
                raise ChatTemplateError("chat template: exponent too large")
            return left**right
        if op == "*":
            seq, n = (left, right) if isinstance(left, _SIZED) else (right, left)
            size = len(seq) * n if isinstance(seq, _SIZED) and isinstance(n, int) else 0
        else:
            both = isinstance(left, _SIZED) and isinstance(right, _SIZED)
            size = len(left) + len(right) if both else 0
        if size > self.max_output:
            raise ChatTemplateError(f"chat template output exceeds {self.max_output} characters")
        return left * right if op == "*" else operator.add(left, right)


def _deadline_tracer(limit: float) -> Any:
    """A ``sys.settrace`` function that stops a render after ``limit`` seconds. It
    follows only the template's own compiled code (filename ``<template>``), so a loop
    that yields nothing, which the output bound cannot see, still ends."""
    deadline = time.monotonic() + limit

    def line(frame: Any, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise ChatTemplateError(f"chat template took longer than {limit:g} s")
        return line

    def call(frame: Any, event: str, arg: Any) -> Any:
        return line if frame.f_code.co_filename == "<template>" else None

    return call


class ChatTemplate:
    """A compiled chat template: ``render(messages, add_generation_prompt=True)``."""

    def __init__(
        self,
        source: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        max_output: int = DEFAULT_MAX_OUTPUT,
        max_seconds: float = DEFAULT_MAX_SECONDS,
    ) -> None:
        if not isinstance(source, str) or not source.strip():
            raise ChatTemplateError("empty chat template")
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.max_output = max_output
        self.max_seconds = max_seconds
        env = _BoundedSandbox(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[loopcontrols, _GenerationTags],
            undefined=jinja2.Undefined,
            autoescape=False,
            keep_trailing_newline=False,
        )
        env.max_output = max_output
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateError as e:
            raise ChatTemplateError(f"invalid chat template: {e}") from e

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> str:
        """Render ``messages``; raises ChatTemplateError on any template failure."""
        now = time.localtime()
        context = {
            "messages": _thaw(messages),
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            # what llama.cpp puts in every template's context
            "enable_thinking": True,
            "datetime": time.strftime("%b %d %Y", now),
            "date_string": time.strftime("%d %b %Y", now),
            **{k: _thaw(v) for k, v in extra.items()},
        }
        if tools:
            context["tools"] = _thaw(tools)
        out: list[str] = []
        size = 0
        outer = sys.gettrace()  # a debugger's or coverage's tracer, put back below
        sys.settrace(_deadline_tracer(self.max_seconds))
        try:
            # generate() yields as it renders, so a runaway template is stopped at the bound
            # instead of building the whole string first.
            for piece in self._template.generate(context):
                size += len(piece)
                if size > self.max_output:
                    raise ChatTemplateError(
                        f"chat template output exceeds {self.max_output} characters"
                    )
                out.append(piece)
        except ChatTemplateError:
            raise
        except jinja2.exceptions.SecurityError as e:
            raise ChatTemplateError(f"chat template refused by the sandbox: {e}") from e
        except (
            jinja2.TemplateError,
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            AttributeError,
            OverflowError,
            RecursionError,
            ZeroDivisionError,
        ) as e:
            raise ChatTemplateError(f"chat template failed: {type(e).__name__}: {e}") from e
        finally:
            sys.settrace(outer)
        return "".join(out)


def validate_messages(messages: Any, allow_empty: bool = False) -> list[dict[str, Any]]:
    """Check OpenAI-style messages; returns plain dicts. Raises ValueError with the reason."""
    if not isinstance(messages, (list, tuple)):
        raise ValueError("'messages' must be an array of message objects")
    if not messages and not allow_empty:
        raise ValueError("'messages' must not be empty")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ValueError(f"messages[{i}] must be an object")
        role = m.get("role")
        if not isinstance(role, str):
            raise ValueError(f"messages[{i}].role must be a string")
        if role not in ROLES:
            raise ValueError(f"messages[{i}].role '{role}' is not one of {sorted(ROLES)}")
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise ValueError(f"messages[{i}].content must be a string, an array of parts or null")
        if isinstance(content, list):
            content = _join_text_parts(content, i)
        if content is None and not m.get("tool_calls"):
            raise ValueError(f"messages[{i}] needs content or tool_calls")
        msg = dict(m)
        msg["content"] = content if content is not None else ""
        out.append(msg)
    return out


class TextParts(str):
    """A message's text parts joined as llama.cpp joins them where a template reads the
    content as a string (a newline between parts), keeping the parts (``_parts``, out of a
    template's reach) for a template that reads typed content, which llama.cpp hands the
    list (``arguments_for_template``'s caller picks, by the template's capabilities)."""

    _parts: list[dict[str, str]]


def _join_text_parts(parts: list[Any], i: int) -> str:
    """Text parts joined as llama.cpp joins them: a newline between text parts, none next
    to a media marker (the server's stand-in for an image or audio). Text alone keeps its
    parts (``TextParts``)."""
    markers = False
    for j, p in enumerate(parts):
        if (
            not isinstance(p, Mapping)
            or p.get("type") not in ("text", "media_marker")
            or not isinstance(p.get("text"), str)
        ):
            raise ValueError(
                f"messages[{i}].content[{j}] must be a text part {{'type': 'text', 'text': ...}}"
            )
        markers = markers or p["type"] == "media_marker"
    out, after_marker = "", False
    for p in parts:
        if p["type"] == "text":
            if out and not after_marker:
                out += "\n"
            after_marker = False
        else:
            after_marker = True
        out += p["text"]
    if markers or not parts:
        return out
    joined = TextParts(out)
    joined._parts = [{"type": "text", "text": p["text"]} for p in parts]
    return joined


class BuiltinTemplate(ChatTemplate):
    """One of llama.cpp's built-in formats, named as ``--chat-template`` accepts them
    (``llama3``, ``command-r``, ``mistral-v7`` ...): formatted by llama.cpp in C++, no
    Jinja. Messages are (role, text) pairs; tools are the caller's business (the generic
    tool scheme writes them into a system message)."""

    def __init__(self, name: str, *, bos_token: str = "", eos_token: str = "") -> None:
        self.source = name
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.max_output = DEFAULT_MAX_OUTPUT

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> str:
        from pyllama import _core

        pairs = []
        for i, m in enumerate(messages):
            content = m.get("content") or ""
            if isinstance(content, list):
                content = _join_text_parts(content, i)
            pairs.append((str(m.get("role", "")), str(content)))
        try:
            return _core.chat_apply_builtin(self.source, pairs, add_generation_prompt)
        except ValueError as e:
            raise ChatTemplateError(str(e)) from e


def make_template(source: str, *, bos_token: str = "", eos_token: str = "") -> ChatTemplate:
    """A Jinja template, or llama.cpp's built-in format when ``source`` names one
    (``chatml`` is the Jinja ChatML, as llama-server)."""
    from pyllama import _core

    if source == "chatml":
        source = CHATML
    elif source in _core.chat_builtin_templates():
        return BuiltinTemplate(source, bos_token=bos_token, eos_token=eos_token)
    return ChatTemplate(source, bos_token=bos_token, eos_token=eos_token)


def tokenize_chat(model: Any, messages: Sequence[Mapping[str, Any]], prompt: str) -> list[int]:
    """Tokenize a rendered chat prompt as llama-server does (BOS if the model wants it,
    special tokens parsed), except that special-token text typed inside a message (a
    user writing '<|im_end|>') stays text: such contents are tokenized on their own
    without special parsing."""
    contents = [
        m["content"] for m in messages if isinstance(m.get("content"), str) and m["content"]
    ]
    # has_special_text is exact and cheap; the comparison keeps only contents whose
    # special-looking text really tokenizes differently
    risky = [
        c
        for c in contents
        if model.has_special_text(c)
        and model.tokenize(c, False, True) != model.tokenize(c, False, False)
    ]
    if not risky:
        return model.tokenize_prompt(prompt)
    tokens: list[int] = [model.token_bos] if model.add_bos else []
    pos = 0
    for c in risky:
        i = prompt.find(c, pos)
        if i < 0:
            continue  # the template rewrote this content; its specials were not from the user
        tokens += model.tokenize_prompt(prompt[pos:i], False)
        tokens += model.tokenize(c, False, False)
        pos = i + len(c)
    tokens += model.tokenize_prompt(prompt[pos:], False)
    return tokens
