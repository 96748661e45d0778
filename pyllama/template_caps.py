"""What a chat template does with its inputs, found the way llama.cpp finds it
(``common/jinja/caps.cpp``): render probe conversations through the template (in pyllama's
sandbox, with its bounds) and watch which input values it reads. /props shows them
(``chat_template_caps``); ``template_messages`` shapes a chat's messages by them, as
llama.cpp does before every render.

A probe's inputs are wrapped so that reading a message field, iterating a list, testing a
value (``is string``) or filtering it (``selectattr``, ``tojson``) is recorded, as
llama.cpp's Jinja runtime records it in its ``stats``. The probes and the rules that turn
what was read into capabilities are llama.cpp's, one for one."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jinja2

from pyllama.chat import ChatTemplate, ChatTemplateError, TextParts

__all__ = ["template_caps", "template_messages"]

Path = tuple[Any, ...]


class _Record:
    """What one render read: the paths of the inputs used and the operations on them."""

    def __init__(self) -> None:
        self.used: set[Path] = set()
        self.ops: dict[Path, set[str]] = {}

    def use(self, path: Path, op: str | None = None) -> None:
        self.used.add(path)
        if op is not None:
            self.ops.setdefault(path, set()).add(op)

    def has(self, path: Path, *ops: str) -> bool:
        return bool(self.ops.get(path, set()) & set(ops))


class _Tracked:
    _rec: _Record
    _path: Path


class _Dict(dict, _Tracked):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        self._rec.use(self._path, "object_access")
        self._rec.use((*self._path, key))
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if dict.__contains__(self, key) else default


class _List(list, _Tracked):  # type: ignore[type-arg]
    def __getitem__(self, index: Any) -> Any:
        value = list.__getitem__(self, index)
        self._rec.use(self._path, "array_access")
        if isinstance(index, int):
            self._rec.use((*self._path, index % max(len(self), 1)))
        return value

    def __iter__(self) -> Iterator[Any]:
        self._rec.use(self._path, "array_access")
        return list.__iter__(self)


class _Str(str, _Tracked):
    def _touch(self) -> None:
        self._rec.use(self._path)

    def __str__(self) -> str:
        self._touch()
        return str.__str__(self)

    def __eq__(self, other: object) -> bool:
        self._touch()
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        self._touch()
        return str.__ne__(self, other)

    __hash__ = str.__hash__

    def __add__(self, other: str) -> str:
        self._touch()
        return str.__add__(self, other)

    def __radd__(self, other: str) -> str:
        self._touch()
        return other + str(self)

    def __contains__(self, other: object) -> bool:
        self._touch()
        return str.__contains__(self, other)  # type: ignore[operator]

    def __len__(self) -> int:
        self._touch()
        return str.__len__(self)

    def __getitem__(self, index: Any) -> str:
        self._rec.use(self._path, "array_access" if isinstance(index, int) else None)
        return str.__getitem__(self, index)

    def __iter__(self) -> Iterator[str]:
        # llama.cpp's runtime cannot loop over a string: the probe fails there too
        self._rec.use(self._path, "array_access")
        raise TypeError("a string is not iterable here")


def _wrap(value: Any, rec: _Record, path: Path = ()) -> Any:
    out: Any
    if isinstance(value, dict):
        out = _Dict({k: _wrap(v, rec, (*path, k)) for k, v in value.items()})
    elif isinstance(value, list):
        out = _List(_wrap(v, rec, (*path, i)) for i, v in enumerate(value))
    elif isinstance(value, str):
        out = _Str(value)
    else:
        return value
    out._rec, out._path = rec, path
    return out


def _use_deep(value: Any) -> None:
    if isinstance(value, _Tracked):
        value._rec.use(value._path)
    if isinstance(value, dict):
        for v in dict.values(value):
            _use_deep(v)
    elif isinstance(value, list):
        for v in list.__iter__(value):
            _use_deep(v)
    elif isinstance(value, (tuple, set)):
        for v in value:
            _use_deep(v)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [_plain(v) for v in list.__iter__(value)]
    return str.__str__(value) if isinstance(value, str) else value


def _recording(fn: Callable[..., Any], op: str, deep: bool, skip: int) -> Callable[..., Any]:
    """A filter or test that records its input (``skip``: context arguments first).
    ``deep`` (tojson, string): every value inside is used, as llama.cpp marks it; the
    filter then gets plain values (its own walk through them is no template access)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if len(args) <= skip:
            return fn(*args, **kwargs)
        value = args[skip]
        if isinstance(value, _Tracked):
            value._rec.use(value._path, op)
        if deep:
            if isinstance(value, Iterator):  # map()/select() output: the items it holds
                value = list(value)
            _use_deep(value)
            args = (*args[:skip], _plain(value), *args[skip + 1 :])
        return fn(*args, **kwargs)

    return call


def _probe_template(source: str) -> ChatTemplate:
    """A template of its own whose filters and tests record what they are applied to."""
    tmpl = ChatTemplate(source)
    env = tmpl._template.environment  # this instance's own environment
    for table, prefix in ((env.filters, ""), (env.tests, "test_is_")):
        for name, fn in list(table.items()):
            skip = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0
            wrapped = _recording(fn, prefix + name, name in ("tojson", "string"), skip)
            if skip:
                wrapped.jinja_pass_arg = fn.jinja_pass_arg  # type: ignore[attr-defined]
            table[name] = wrapped
    return tmpl


class _Probe:
    def __init__(self, source: str) -> None:
        self.tmpl = _probe_template(source)

    def run(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> tuple[bool, _Record, str]:
        rec = _Record()
        wrapped_extra = {k: _wrap(v, rec, (k,)) for k, v in extra.items()}
        try:
            out = self.tmpl.render(
                _wrap(messages, rec, ("messages",)),
                tools=_wrap(tools, rec, ("tools",)) if tools else None,
                add_generation_prompt=True,
                **wrapped_extra,
            )
        except (ChatTemplateError, jinja2.TemplateError, TypeError, ValueError):
            return False, rec, ""
        return True, rec, out


_USER = {"role": "user", "content": "User message"}
_TOOLS = [
    {
        "name": "tool",
        "type": "function",
        "function": {
            "name": "tool1",
            "description": "Tool description",
            "parameters": {
                "type": "object",
                "properties": {"arg": {"type": "string", "description": "Arg description"}},
                "required": ["arg"],
            },
        },
    }
]


def _tool_chat(arguments: Any, n_calls: int = 1) -> list[dict[str, Any]]:
    calls = [
        {
            "id": f"call0000{i + 1}",
            "type": "function",
            "function": {"name": "tool1", "arguments": arguments},
        }
        for i in range(n_calls)
    ]
    return [
        _USER,
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        _USER,
    ]


def _thinking(enabled: bool) -> dict[str, bool]:
    return {
        "preserve_thinking": enabled,
        "clear_thinking": not enabled,
        "truncate_history_thinking": not enabled,
        "drop_thinking": not enabled,
    }


@functools.lru_cache(maxsize=8)
def template_caps(source: str) -> dict[str, bool]:
    """llama.cpp's ``caps::to_map()`` for a Jinja chat template (cached per source)."""
    probe = _Probe(source)
    caps = {
        "supports_tools": True,
        "supports_tool_calls": True,
        "supports_system_role": True,
        "supports_parallel_tool_calls": True,
        "supports_preserve_reasoning": False,
        "supports_reasoning_effort": False,
        "supports_string_content": True,
        "supports_typed_content": False,
        "supports_object_arguments": False,
    }
    content: Path = ("messages", 0, "content")

    # typed content: is the content read as a list of parts?
    marker = "STRING_MARKER"
    ok, rec, out = probe.run([{"role": "user", "content": marker}])
    as_array = rec.has(content, "selectattr", "array_access")
    caps["supports_typed_content"] = as_array
    if not ok or (as_array and marker not in out):
        caps["supports_string_content"] = False
    if rec.has(content, "test_is_string"):
        ok, rec, _ = probe.run([{"role": "user", "content": []}])
        if ok and rec.has(content, "selectattr", "array_access"):
            caps["supports_typed_content"] = True

    # system role: is the system message's content read?
    _, rec, _ = probe.run([{"role": "system", "content": "System message"}, _USER])
    if content not in rec.used:
        caps["supports_system_role"] = False

    # tools, with the arguments as an object, then (if not read) as a JSON string
    calls: Path = ("messages", 1, "tool_calls")
    ok, rec, _ = probe.run(_tool_chat({"arg": "value"}), tools=_TOOLS)
    if ok:
        if ("tools", 0, "function", "name") not in rec.used:
            caps["supports_tools"] = False
        if calls not in rec.used:
            caps["supports_tool_calls"] = False
        elif (*calls, 0, "function", "arguments", "arg") in rec.used:
            caps["supports_object_arguments"] = True
    if not caps["supports_object_arguments"]:
        ok, rec, _ = probe.run(_tool_chat('{"arg": "value"}'), tools=_TOOLS)
        if not ok:
            caps["supports_tools"] = caps["supports_tool_calls"] = False
        else:
            if ("tools", 0, "function", "name") not in rec.used:
                caps["supports_tools"] = False
            if calls not in rec.used:
                caps["supports_tool_calls"] = False

    # parallel calls: is the second call read?
    args: Any = {"arg": "value"} if caps["supports_object_arguments"] else '{"arg": "value"}'
    ok, rec, _ = probe.run(_tool_chat(args, n_calls=2), tools=_TOOLS)
    if not ok or (*calls, 1, "function") not in rec.used:
        caps["supports_parallel_tool_calls"] = False

    # reasoning kept in the history (seen in the output, as llama.cpp checks)
    placeholder = "<REASONING_CONTENT_PLACEHOLDER>"
    history = [
        _USER,
        {"role": "assistant", "content": "Assistant message", "reasoning_content": placeholder},
        _USER,
        {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning"},
        _USER,
    ]
    _, _, out = probe.run(history, enable_thinking=True, **_thinking(True))
    caps["supports_preserve_reasoning"] = placeholder in out

    # reasoning effort: is the level read?
    _, rec, _ = probe.run(
        [_USER], enable_thinking=True, reasoning_effort="low", reasoning_strength="low"
    )
    caps["supports_reasoning_effort"] = bool(
        {("reasoning_effort",), ("reasoning_strength",)} & rec.used
    )
    return caps


def template_messages(source: str, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as llama.cpp hands them to the Jinja template ``source``
    (``common/chat.cpp``: its workarounds and ``messages_inp_normalizer``): content sent as
    text parts stays a list of parts where the template reads typed content, and a string
    becomes one text part where it reads nothing else; tool-call arguments are objects
    where the template reads them so, else JSON text (an object sent in the request written
    compactly). Raises ValueError, in llama.cpp's words, for arguments that are not JSON
    where an object is needed. LFM2 templates read reasoning as ``thinking``, which
    llama.cpp's LFM2 handler copies from ``reasoning_content``."""
    caps = template_caps(source)
    lfm2 = _is_lfm2(source)
    typed = caps["supports_typed_content"]
    only_typed = typed and not caps["supports_string_content"]
    objects = caps["supports_object_arguments"]
    out = []
    for m in messages:
        msg = dict(m)
        content = msg.get("content")
        if isinstance(content, TextParts):
            msg["content"] = [dict(p) for p in content._parts] if typed else str(content)
        elif only_typed and isinstance(content, str):
            msg["content"] = [{"type": "text", "text": content}]
        calls = msg.get("tool_calls")
        if isinstance(calls, list) and calls:
            msg["tool_calls"] = [_call_arguments(c, objects) for c in calls]
        if lfm2 and isinstance(msg.get("reasoning_content"), str) and msg["reasoning_content"]:
            msg["thinking"] = msg["reasoning_content"]
        out.append(msg)
    return out


def _is_lfm2(source: str) -> bool:
    """llama.cpp's LFM2 (tool-list tokens) and LFM2.5 ("List of tools: [") detection."""
    return ("<|tool_list_start|>" in source and "<|tool_list_end|>" in source) or (
        "List of tools: [" in source and "<|tool_list_start|>" not in source
    )


def _call_arguments(call: Any, objects: bool) -> Any:
    fn = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(fn, Mapping) or "arguments" not in fn:
        return call
    args = fn["arguments"]
    if objects and isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError as e:
            raise ValueError(f"Failed to parse tool call arguments as JSON: {e}") from e
    elif not objects and not isinstance(args, str):
        args = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
    return {**call, "function": {**fn, "arguments": args}}
