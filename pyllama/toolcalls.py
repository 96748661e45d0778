"""Tool calls: which syntax a chat template asks the model to use, a grammar that makes the
model follow it, and parsers (whole text and streamed) that lift the calls out of the output.

Families are told apart by markers in the template source, as llama.cpp does:
Hermes/Qwen ``<tool_call>{json}</tool_call>``, Mistral ``[TOOL_CALLS][...]``, Granite
``<|tool_call|>[...]``, Command R7B ``<|START_ACTION|>[...]<|END_ACTION|>``, FireFunction
``functools[...]``, Llama 3.x bare ``{"name": ..., "parameters": ...}``, DeepSeek R1's
``<|tool_call_begin|>`` blocks (written with fullwidth bars). A template that does not know tools at all gets the generic
scheme: a system message describing the tools and a JSON answer, either
``{"tool_call": {...}}`` / ``{"tool_calls": [...]}`` or ``{"response": "..."}``, enforced by a
grammar.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ToolCall",
    "ToolFormat",
    "ToolStream",
    "detect_format",
    "generic_history",
    "generic_system_prompt",
    "parse_tool_calls",
    "template_context",
    "tool_choice_mode",
    "tool_grammar",
    "validate_tools",
    "with_system_prompt",
]

_ALNUM = string.ascii_letters + string.digits


def _ds(word: str) -> str:
    """DeepSeek's markers: fullwidth bars and U+2581 for underscores."""
    return "<\uff5c" + word.replace("_", "\u2581") + "\uff5c>"


_DEEPSEEK_CALLS = _ds("tool_calls_begin")
_DEEPSEEK_CALL = re.compile(
    re.escape(_ds("tool_call_begin"))
    + r"\s*(?:function)?\s*"
    + re.escape(_ds("tool_sep"))
    + r"\s*([^\n<]+?)\s*\n```(?:json)?\s*\n?(.*?)\s*```\s*"
    + re.escape(_ds("tool_call_end")),
    re.S,
)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text, as the OpenAI API carries it
    id: str = field(default_factory=lambda: "".join(secrets.choice(_ALNUM) for _ in range(32)))

    def to_openai(self, index: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
            "id": self.id,
        }
        if index is not None:
            out["index"] = index
        return out


@dataclass(frozen=True)
class ToolFormat:
    """How one template family writes calls: ``start`` payload ``end``, the payload a JSON
    object (one call) or array (several), with these key names."""

    name: str
    start: str = ""
    end: str = ""
    array: bool = False
    name_key: str = "name"
    args_keys: tuple[str, ...] = ("arguments",)
    id_key: str = ""

    @property
    def generic(self) -> bool:
        return self.name == "generic"


HERMES = ToolFormat("hermes", "<tool_call>", "</tool_call>")
MISTRAL = ToolFormat("mistral", "[TOOL_CALLS]", array=True, id_key="id")
GRANITE = ToolFormat("granite", "<|tool_call|>", array=True)
COMMAND_R7B = ToolFormat(
    "command-r7b",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    array=True,
    name_key="tool_name",
    args_keys=("parameters",),
    id_key="tool_call_id",
)
FIREFUNCTION = ToolFormat("firefunction", "functools", array=True)
LLAMA3 = ToolFormat("llama3", args_keys=("parameters", "arguments"))
DEEPSEEK = ToolFormat("deepseek-r1", _DEEPSEEK_CALLS, _ds("tool_calls_end"))
GENERIC = ToolFormat("generic")

_MARKERS: list[tuple[str, ToolFormat]] = [
    ("<tool_call>", HERMES),
    ("[TOOL_CALLS]", MISTRAL),
    ("<|tool_call|>", GRANITE),
    ("<|START_ACTION|>", COMMAND_R7B),
    ("functools[", FIREFUNCTION),
    ("tool\u2581calls\u2581begin", DEEPSEEK),
]


def detect_format(template_source: str) -> ToolFormat:
    """The tool-call family a chat template uses (GENERIC when it ignores ``tools``)."""
    for marker, fmt in _MARKERS:
        if marker in template_source:
            return fmt
    if "tools" in template_source or "<|python_tag|>" in template_source:
        return LLAMA3  # a template rendering tools without a marker: bare JSON calls
    return GENERIC


def template_context(fmt: ToolFormat, tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Extra template variables a family's template reads besides ``tools`` (the library's
    ``Llama``; the server passes none, as llama-server, whose FireFunction template then
    renders ``functions`` as empty)."""
    if fmt is FIREFUNCTION:  # reads the tools as JSON text ("" without tools)
        return {"functions": json.dumps(list(tools), indent=2, ensure_ascii=False) if tools else ""}
    return {}


def validate_tools(tools: Any) -> list[dict[str, Any]]:
    """OpenAI ``tools``: a list of {"type": "function", "function": {"name", "parameters"}}.
    Returns the function objects; raises ValueError naming the bad entry."""
    if not isinstance(tools, list):
        raise ValueError("'tools' must be an array")
    out = []
    for i, t in enumerate(tools):
        if not isinstance(t, Mapping) or t.get("type", "function") != "function":
            raise ValueError(f"tools[{i}] must be an object with type 'function'")
        fn = t.get("function")
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ValueError(f"tools[{i}].function.name must be a non-empty string")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, Mapping):
            raise ValueError(f"tools[{i}].function.parameters must be a JSON schema object")
        out.append({**fn, "parameters": dict(params)})
    return out


def _call_schema(fmt: ToolFormat, fn: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            fmt.name_key: {"const": fn["name"]},
            fmt.args_keys[0]: fn["parameters"],
        },
        "required": [fmt.name_key, fmt.args_keys[0]],
    }


def _any_call(fmt: ToolFormat, functions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    schemas = [_call_schema(fmt, fn) for fn in functions]
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def generic_schema(
    functions: Sequence[Mapping[str, Any]], required: bool, parallel: bool
) -> dict[str, Any]:
    call = _any_call(GENERIC, functions)
    calls: dict[str, Any] = (
        {
            "type": "object",
            "properties": {"tool_calls": {"type": "array", "items": call, "minItems": 1}},
            "required": ["tool_calls"],
        }
        if parallel
        else {"type": "object", "properties": {"tool_call": call}, "required": ["tool_call"]}
    )
    if required:
        return calls
    answer = {
        "type": "object",
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
    }
    return {"anyOf": [calls, answer]}


def generic_history(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For templates that ignore ``tool_calls``: an assistant turn's calls written into
    its content as the generic JSON the model is asked to reply with (as llama.cpp's
    template polyfill does), so the model sees what it called."""
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if m.get("role") != "assistant" or not calls:
            out.append(dict(m))
            continue
        payload: dict[str, Any] = {"tool_calls": []}
        for c in calls:
            fn = c.get("function", c) if isinstance(c, Mapping) else {}
            args = fn.get("arguments", {})
            if isinstance(args, str):
                with contextlib.suppress(ValueError):  # not JSON: kept as the text it is
                    args = json.loads(args)
            payload["tool_calls"].append({"name": fn.get("name"), "arguments": args})
        if m.get("content"):
            payload["content"] = m["content"]
        msg = {k: v for k, v in m.items() if k != "tool_calls"}
        msg["content"] = json.dumps(payload, indent=2, ensure_ascii=False)
        out.append(msg)
    return out


def generic_system_prompt(
    functions: Sequence[Mapping[str, Any]], required: bool, parallel: bool
) -> str:
    """What a template without tool support is told (a system message)."""
    schema = generic_schema(functions, required, parallel)
    what = (
        "with `tool_calls` (a request to call tools)"
        if parallel
        else "with `tool_call` (a request to call a tool)"
    )
    if not required:
        what = f"either {what} or with `response` (your reply to the user's request)"
    return (
        f"Respond in JSON format, {what}.\nThe tools you can call:\n"
        + json.dumps(
            [
                {k: fn[k] for k in ("name", "description", "parameters") if k in fn}
                for fn in functions
            ],
            ensure_ascii=False,
        )
        + "\nYour answer must match this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False)
    )


def tool_choice_mode(
    choice: Any, functions: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]], str | None]:
    """OpenAI ``tool_choice``: ("auto" | "required" | "none", the functions allowed, the
    function a named choice names). ValueError for anything else."""
    if choice is None:
        return "auto", functions, None
    if isinstance(choice, str):
        if choice not in ("auto", "required", "none"):
            raise ValueError(f"Invalid tool_choice: {choice}")
        return choice, functions, None
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if choice.get("type") == "function" and isinstance(name, str):
            chosen = [f for f in functions if f["name"] == name]
            if not chosen:
                raise ValueError(f"tool_choice names an unknown function '{name}'")
            return "required", chosen, name
    raise ValueError("Invalid tool_choice: expected 'auto', 'none', 'required' or a function")


def with_system_prompt(msgs: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """``text`` appended to the system message, or a system message put first."""
    if msgs and msgs[0].get("role") == "system":
        first = dict(msgs[0])
        first["content"] = f"{first.get('content') or ''}\n\n{text}".lstrip()
        return [first, *msgs[1:]]
    return [{"role": "system", "content": text}, *msgs]


def _rename_root(gbnf: str, name: str) -> str:
    return re.sub(r"^root\s*::=", f"{name} ::=", gbnf, count=1, flags=re.M)


def _lit(s: str) -> str:
    return json.dumps(s)  # a GBNF string literal uses JSON's escapes


def tool_grammar(
    fmt: ToolFormat,
    functions: Sequence[Mapping[str, Any]],
    required: bool,
    parallel: bool,
    schema_to_grammar: Any,
) -> tuple[str, list[str]]:
    """(GBNF, trigger patterns). With trigger patterns the grammar is lazy: free text until
    one matches, then the calls from its first group on (a family's marker anywhere; for
    bare JSON calls, an object that opens the reply with the name key, so a
    reply that needs no tool stays free). ``schema_to_grammar`` converts a JSON schema
    (text) to GBNF."""
    if fmt.generic:
        return schema_to_grammar(json.dumps(generic_schema(functions, required, parallel))), []
    if fmt is DEEPSEEK:
        return "", []  # parsed, not constrained
    call = _rename_root(schema_to_grammar(json.dumps(_any_call(fmt, functions))), "tool-call-json")
    ws = "tool-ws ::= [ \\t\\n]*\n"
    if fmt.array:
        body = (
            '"[" tool-ws tool-call-json '
            + ('(tool-ws "," tool-ws tool-call-json)* ' if parallel else "")
            + 'tool-ws "]"'
        )
        one = f"{_lit(fmt.start)} tool-ws {body}" + (f" tool-ws {_lit(fmt.end)}" if fmt.end else "")
        root = f"root ::= {one}\n"
    elif fmt.start:
        one = f"{_lit(fmt.start)} tool-ws tool-call-json tool-ws {_lit(fmt.end)}"
        root = (
            f"root ::= tool-one{' (tool-ws tool-one)*' if parallel else ''}\ntool-one ::= {one}\n"
        )
    else:
        root = f"root ::= tool-call-json{' (tool-ws tool-call-json)*' if parallel else ''}\n"
    grammar = root + ws + call
    if required:
        return grammar, []
    if not fmt.start:
        return grammar, ['^\\s*(\\{\\s*"' + fmt.name_key + '")[\\s\\S]*']
    return grammar, ["^[\\s\\S]*?(" + re.escape(fmt.start) + ")[\\s\\S]*"]


def _args_text(args: Any) -> str:
    if isinstance(args, str):
        return args
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def _calls_from(fmt: ToolFormat, payload: Any) -> list[ToolCall] | None:
    items = payload if isinstance(payload, list) else [payload]
    calls = []
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get(fmt.name_key), str):
            return None
        args = next((item[k] for k in fmt.args_keys if k in item), {})
        cid = item.get(fmt.id_key) if fmt.id_key else None
        if isinstance(cid, (str, int)) and str(cid):
            calls.append(ToolCall(item[fmt.name_key], _args_text(args), str(cid)))
        else:
            calls.append(ToolCall(item[fmt.name_key], _args_text(args)))
    return calls


_decoder = json.JSONDecoder()


def _json_at(text: str, pos: int) -> tuple[Any, int] | None:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    try:
        return _decoder.raw_decode(text, pos)
    except ValueError:
        return None


def _parse_generic(text: str) -> tuple[str, list[ToolCall]]:
    got = _json_at(text, 0)
    if got is None or not isinstance(got[0], Mapping):
        return text, []
    obj = got[0]
    if "tool_calls" in obj and isinstance(obj["tool_calls"], list):
        calls = _calls_from(GENERIC, obj["tool_calls"])
    elif "tool_call" in obj:
        calls = _calls_from(GENERIC, obj["tool_call"])
    elif "response" in obj:
        r = obj["response"]
        return (r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)), []
    else:
        calls = None
    return ("", calls) if calls else (text, [])


def _parse_deepseek(text: str) -> tuple[str, list[ToolCall]]:
    start = text.find(_DEEPSEEK_CALLS)
    if start < 0:
        return text, []
    calls = [
        ToolCall(m.group(1).strip(), m.group(2).strip())
        for m in _DEEPSEEK_CALL.finditer(text, start)
    ]
    if not calls:
        return text, []
    end = text.find(DEEPSEEK.end, start)
    rest = text[end + len(DEEPSEEK.end) :] if end >= 0 else ""
    return (text[:start] + rest).strip(), calls


def parse_tool_calls(fmt: ToolFormat, text: str) -> tuple[str, list[ToolCall]]:
    """(content, calls) of a finished output. Text that does not parse stays content."""
    if fmt.generic:
        return _parse_generic(text)
    if fmt is DEEPSEEK:
        return _parse_deepseek(text)
    content: list[str] = []
    calls: list[ToolCall] = []
    pos = 0
    while pos < len(text):
        if fmt.start:
            at = text.find(fmt.start, pos)
            if at < 0:
                break
            body = at + len(fmt.start)
        else:
            stripped = text[pos:].lstrip()
            if stripped.startswith("<|python_tag|>"):
                stripped = stripped[len("<|python_tag|>") :]
            if not stripped.startswith("{"):
                break
            at = pos
            body = len(text) - len(stripped)
        got = _json_at(text, body)
        found = _calls_from(fmt, got[0]) if got else None
        if got is None or not found:
            break
        end = got[1]
        if fmt.end:
            close = _skip_ws(text, end)
            if text.startswith(fmt.end, close):
                end = close + len(fmt.end)
        content.append(text[pos:at])
        calls.extend(found)
        pos = _skip_ws(text, end)
    content.append(text[pos:])
    return ("".join(content).strip() if calls else text), calls


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


class ToolStream:
    """Streams content while holding back anything that may be a tool call.

    ``feed(delta)`` and ``finish()`` return (content_delta, new_calls). Content is released
    up to where a call could begin (the start marker or a prefix of it at the end of the
    buffer; for marker-less families, output starting with ``{``); a call is released whole
    once its text parses."""

    def __init__(self, fmt: ToolFormat) -> None:
        self.fmt = fmt
        self.buf = ""
        self.emitted_any = False

    def _safe_prefix(self) -> int:
        """How much of buf can go out as content now."""
        fmt = self.fmt
        if fmt.generic:
            return 0
        if not fmt.start:
            if not self.emitted_any and self.buf.lstrip()[:1] in ("", "{", "<"):
                return 0  # may still become a call
            return len(self.buf)
        at = self.buf.find(fmt.start)
        if at >= 0:
            return at
        for k in range(min(len(fmt.start) - 1, len(self.buf)), 0, -1):
            if fmt.start.startswith(self.buf[-k:]):
                return len(self.buf) - k
        return len(self.buf)

    def feed(self, delta: str) -> tuple[str, list[ToolCall]]:
        self.buf += delta
        out: list[str] = []
        calls: list[ToolCall] = []
        while True:
            n = self._safe_prefix()
            if n:
                out.append(self.buf[:n])
                self.buf = self.buf[n:]
                self.emitted_any = True
            if not self.fmt.start or not self.buf.startswith(self.fmt.start):
                break
            _, found = parse_tool_calls(self.fmt, self.buf)
            if not found or (self.fmt.end and self.fmt.end not in self.buf):
                break
            # the calls parsed: drop their text, keep what follows
            calls.extend(found)
            self.buf = self.buf[self._consumed() :].lstrip()
        return "".join(out), calls

    def _consumed(self) -> int:
        fmt = self.fmt
        if fmt is DEEPSEEK:
            return self.buf.find(fmt.end) + len(fmt.end)
        got = _json_at(self.buf, len(fmt.start))
        assert got is not None
        end = got[1]
        if fmt.end:
            close = _skip_ws(self.buf, end)
            if self.buf.startswith(fmt.end, close):
                end = close + len(fmt.end)
        return end

    def finish(self) -> tuple[str, list[ToolCall]]:
        text, calls = parse_tool_calls(self.fmt, self.buf)
        self.buf = ""
        return text, calls
