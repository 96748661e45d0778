"""OpenAI Responses request pieces (input items, tools, tool_choice, text.format) to the
chat shapes ``pipeline.turn`` takes; bad input is a 400 naming the field. The input items
become messages through llama-server's own conversion (bound), after the checks here.
Tools, tool_choice and text.format stay here: they also give the echo a response carries,
and llama-server's conversion skips a tool of another type where pyllama refuses it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from pyllama import _core
from pyllama.server.http.errors import APIError

__all__ = [
    "ReasoningConfig",
    "TextConfig",
    "bad",
    "input_items",
    "text_format",
    "to_chat_tools",
    "to_messages",
    "tool_choice",
]

_ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
_TEXT_PARTS = ("input_text", "output_text")
_UNSUPPORTED_PARTS = ("input_file", "input_audio")


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextConfig(_Loose):
    format: dict[str, Any] | None = None
    verbosity: str | None = None


class ReasoningConfig(_Loose):
    effort: str | None = None
    summary: str | None = None


def bad(message: str) -> APIError:
    return APIError(400, message)


def _part_text(part: Any, where: str) -> str:
    if not isinstance(part, Mapping):
        raise bad(f"{where} must be an object")
    kind = part.get("type")
    if kind in _UNSUPPORTED_PARTS:
        raise bad(f"{where}: '{kind}' is not supported by this server (text only)")
    if kind in _TEXT_PARTS:
        text = part.get("text")
    elif kind == "refusal":
        text = part.get("refusal")
    else:
        raise bad(f"{where}.type must be one of 'input_text', 'output_text', got {kind!r}")
    if not isinstance(text, str):
        raise bad(f"{where}: '{kind}' needs a string 'text'")
    return text


def _image(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    url = part.get("image_url")
    if not isinstance(url, str):
        raise bad(f"{where}: 'input_image' needs a string 'image_url' (file_id is not supported)")
    return {"type": "input_image", "image_url": url}


def _parts(content: Any, where: str, *, images: bool = True) -> list[dict[str, Any]]:
    """A content string or array as input_text / input_image parts."""
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    if not isinstance(content, list):
        raise bad(f"{where}.content must be a string or an array of content parts")
    parts: list[dict[str, Any]] = []
    for j, p in enumerate(content):
        at = f"{where}.content[{j}]"
        if isinstance(p, Mapping) and p.get("type") == "input_image":
            if not images:
                raise bad(f"{where}: images are for user messages")
            parts.append(_image(p, at))
        else:
            parts.append({"type": "input_text", "text": _part_text(p, at)})
    return parts


def _str_field(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise bad(f"{where}.{key} must be a string")
    return value


def _reasoning_text(item: Mapping[str, Any], where: str) -> str:
    texts = []
    for key in ("content", "summary"):
        parts = item.get(key) or []
        if not isinstance(parts, list):
            raise bad(f"{where}.{key} must be an array")
        for j, p in enumerate(parts):
            if not isinstance(p, Mapping) or not isinstance(p.get("text"), str):
                raise bad(f"{where}.{key}[{j}] must be an object with a string 'text'")
            texts.append(p["text"])
        if texts:  # the full reasoning if given, else its summary
            break
    return "".join(texts)


def _item(item: Any, where: str) -> dict[str, Any] | None:
    """One input item checked and put in the form llama-server's conversion reads (it
    takes fewer forms than the API: an assistant message without ``type``, text parts of
    either kind anywhere, a reasoning item with only a summary); None: nothing to say."""
    if not isinstance(item, Mapping):
        raise bad(f"{where} must be an object")
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role not in _ROLES:
            raise bad(f"{where}.role must be one of {', '.join(_ROLES)}, got {role!r}")
        if role != "assistant":
            return {"role": role, "content": _parts(item.get("content"), where)}
        text = [
            {"type": "output_text", "text": p["text"]}
            for p in _parts(item.get("content"), where, images=False)
        ]
        return {"type": "message", "role": "assistant", "content": text}
    if kind == "function_call":
        return {
            "type": "function_call",
            "call_id": _str_field(item, "call_id", where),
            "name": _str_field(item, "name", where),
            "arguments": _str_field(item, "arguments", where),
        }
    if kind == "function_call_output":
        call_id = _str_field(item, "call_id", where)
        output = item.get("output")
        if isinstance(output, list):
            output = [
                {"type": "input_text", "text": _part_text(p, f"{where}.output[{j}]")}
                for j, p in enumerate(output)
            ]
        elif not isinstance(output, str):
            raise bad(f"{where}.output must be a string or an array of content parts")
        return {"type": "function_call_output", "call_id": call_id, "output": output}
    if kind == "reasoning":
        text = _reasoning_text(item, where)
        if not text:
            return None
        return {
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": text}],
        }
    raise bad(
        f"{where}.type {kind!r} is not supported "
        "(message, function_call, function_call_output, reasoning)"
    )


def to_messages(items: str | list[Any], instructions: str | None = None) -> list[dict[str, Any]]:
    """``input`` (a string, or items) to OpenAI chat messages: checked here (a 400 naming
    the field), then converted by llama-server's own ``server_chat_convert_responses_to_chatcmpl``
    (bound): reasoning, assistant messages and function calls that follow each other make
    one assistant message, as there; a string input stays a string message (templates
    render a string and a one-part array differently)."""
    checked: str | list[dict[str, Any]] = items if isinstance(items, str) else [
        c for i, item in enumerate(items) if (c := _item(item, f"input[{i}]")) is not None
    ]  # fmt: skip
    body: dict[str, Any] = {"input": checked}
    if instructions is not None:
        body["instructions"] = instructions
    try:
        return json.loads(_core.chat_responses_to_openai(json.dumps(body)))["messages"]
    except ValueError as e:
        raise bad(str(e)) from e


def input_items(value: str | list[Any]) -> list[Any]:
    if isinstance(value, str):
        if not value:
            raise bad("'input' must not be empty")
        return [{"type": "message", "role": "user", "content": value}]
    return value


def to_chat_tools(
    tools: list[Any] | None,
) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """(chat-shaped tools for the engine, the Responses-shaped echo)."""
    if not tools:
        return None, []
    chat, echo = [], []
    for i, t in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(t, Mapping):
            raise bad(f"{where} must be an object")
        if t.get("type") != "function":
            raise bad(f"{where}: tool type {t.get('type')!r} is not supported (only 'function')")
        # the chat shape {"type", "function": {...}} is accepted too
        fn = t["function"] if isinstance(t.get("function"), Mapping) else t
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise bad(f"{where}.name must be a non-empty string")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, Mapping):
            raise bad(f"{where}.parameters must be a JSON schema object")
        desc = fn.get("description")
        if desc is not None and not isinstance(desc, str):
            raise bad(f"{where}.description must be a string")
        f: dict[str, Any] = {"name": name, "parameters": dict(params)}
        if desc is not None:
            f["description"] = desc
        chat.append({"type": "function", "function": f})
        strict = fn.get("strict", True)
        echo.append({"type": "function", **f, "description": desc, "strict": strict})
    return chat, echo


def tool_choice(choice: Any, names: list[str]) -> tuple[Any, Any]:
    """(chat-shaped tool_choice, the Responses-shaped echo)."""
    if choice is None:
        return None, "auto"
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise bad(f"tool_choice must be 'auto', 'none' or 'required', got {choice!r}")
        if choice == "required" and not names:
            raise bad("tool_choice 'required' needs 'tools'")
        return choice, choice
    if choice.get("type") != "function":
        raise bad(f"tool_choice type {choice.get('type')!r} is not supported (only 'function')")
    name = choice.get("name")
    if not isinstance(name, str):
        raise bad("tool_choice.name must be a string")
    if name not in names:
        raise bad(f"tool_choice names an unknown function '{name}'")
    return {"type": "function", "function": {"name": name}}, {"type": "function", "name": name}


def text_format(text: TextConfig | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(chat response_format, the echoed ``text`` config) from ``text.format``."""
    fmt = text.format if text is not None else None
    verbosity = text.verbosity if text is not None else None
    if fmt is None or fmt.get("type") == "text":
        return None, {"format": {"type": "text"}, "verbosity": verbosity}
    kind = fmt.get("type")
    if kind == "json_object":
        return {"type": "json_object"}, {"format": {"type": kind}, "verbosity": verbosity}
    if kind != "json_schema":
        raise bad(f"text.format.type must be 'text', 'json_object' or 'json_schema', got {kind!r}")
    schema = fmt.get("schema")
    if not isinstance(schema, Mapping):
        raise bad("text.format.schema must be a JSON schema object")
    name = fmt.get("name", "response")
    strict = fmt.get("strict")
    spec = {"name": name, "schema": dict(schema), "strict": strict}
    echo = {"type": kind, **spec, "description": fmt.get("description")}
    return {"type": kind, "json_schema": spec}, {"format": echo, "verbosity": verbosity}
