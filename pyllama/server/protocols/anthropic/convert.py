"""Anthropic request pieces (system, content blocks, tools, tool_choice) to the OpenAI
shapes the chat pipeline takes. The messages are converted by llama-server's own
``server_chat_convert_anthropic_to_oai`` (bound), after checks here that refuse what it
would misread or drop (a field of the wrong type, documents, server tools, unknown blocks)
with a 400 naming the field. Image blocks become OpenAI image parts, which the media
pipeline loads (a 400 there when the model has no vision projector).

Tools and tool_choice stay here: llama-server's conversion reads a named tool
(``{"type": "tool", "name": ...}``) as "any tool" and drops ``none`` and
``disable_parallel_tool_use``; pyllama honours them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from pyllama import _core
from pyllama.server.http.errors import APIError

__all__ = ["to_openai_messages", "to_openai_tools", "tool_choice"]

_UNSUPPORTED = {"document", "search_result", "container_upload"}


def _text(block: Mapping[str, Any], where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise APIError(400, f"{where}.text must be a string")
    return text


def _system(system: Any) -> str | None:
    if system is None:
        return None
    if isinstance(system, str):
        return system
    parts = []
    for i, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise APIError(400, f"system[{i}] must be a text block")
        parts.append(_text(block, f"system[{i}]"))
    return "\n".join(parts)


def _unsupported(kind: str, where: str) -> APIError:
    return APIError(400, f"{where}: content blocks of type '{kind}' are not supported")


def _image(block: Mapping[str, Any], where: str) -> None:
    """An image block: a base64 or URL source."""
    source = block.get("source")
    kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "base64":
        assert isinstance(source, Mapping)
        data, media_type = source.get("data"), source.get("media_type", "image/jpeg")
        if not isinstance(data, str) or not isinstance(media_type, str):
            raise APIError(400, f"{where}.source: a base64 source needs string data and media_type")
        return
    if kind == "url":
        assert isinstance(source, Mapping)
        url = source.get("url")
        if not isinstance(url, str):
            raise APIError(400, f"{where}.source.url must be a string")
        return
    raise APIError(400, f"{where}.source.type must be 'base64' or 'url'")


def _tool_result(block: Mapping[str, Any], where: str) -> None:
    if not isinstance(block.get("tool_use_id"), str):
        raise APIError(400, f"{where}.tool_use_id must be a string")
    content = block.get("content", "")
    if isinstance(content, list):
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "image":
                _image(part, f"{where}.content[{j}]")
            elif kind == "text":
                _text(part, f"{where}.content[{j}]")
            else:
                raise _unsupported(str(kind), f"{where}.content[{j}]")
    elif content is not None and not isinstance(content, str):
        raise APIError(400, f"{where}.content must be a string or an array of text blocks")


def _message(msg: Any, i: int) -> None:
    where = f"messages[{i}]"
    if not isinstance(msg, Mapping):
        raise APIError(400, f"{where} must be an object")
    if msg.get("role") not in ("user", "assistant"):
        raise APIError(400, f"{where}.role must be 'user' or 'assistant'")
    content = msg.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise APIError(400, f"{where}.content must be a string or an array of content blocks")
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            _text(block, at)
        elif kind == "image":
            _image(block, at)
        elif kind in ("thinking", "redacted_thinking"):
            continue  # redacted: encrypted elsewhere, dropped by the conversion
        elif kind == "tool_use":
            if not isinstance(block.get("name"), str) or not isinstance(
                block.get("input", {}), Mapping
            ):
                raise APIError(400, f"{at}: tool_use needs a name and an input object")
        elif kind == "tool_result":
            _tool_result(block, at)
        elif isinstance(kind, str) and (kind in _UNSUPPORTED or kind.endswith("_tool_result")):
            raise _unsupported(kind, at)
        else:
            raise APIError(400, f"{at}: unknown content block type {kind!r}")


def to_openai_messages(system: Any, messages: list[Any]) -> list[dict[str, Any]]:
    """Checked here (a 400 naming the field), then converted by llama-server's own
    ``server_chat_convert_anthropic_to_oai``: text blocks kept as parts, thinking as
    reasoning_content, tool results after the message that holds them, the Claude Code
    billing header's per-request hash made constant (its prompt stays cacheable)."""
    _system(system)
    for i, msg in enumerate(messages):
        _message(msg, i)
    body = {"messages": messages, **({"system": system} if system is not None else {})}
    try:
        converted = json.loads(_core.chat_anthropic_to_openai(orjson.dumps(body).decode()))
    except ValueError as e:
        raise APIError(400, str(e)) from e
    return converted["messages"]


def to_openai_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    out = []
    for i, tool in enumerate(tools):
        kind = tool.get("type", "custom")
        if kind != "custom":  # Anthropic's server tools (web search, bash ...) run remotely
            raise APIError(400, f"tools[{i}]: tool type '{kind}' is not supported")
        name, schema = tool.get("name"), tool.get("input_schema", {"type": "object"})
        if not isinstance(name, str) or not isinstance(schema, Mapping):
            raise APIError(400, f"tools[{i}] needs a name and an input_schema object")
        fn = {"name": name, "parameters": dict(schema)}
        if isinstance(tool.get("description"), str):
            fn["description"] = tool["description"]
        out.append({"type": "function", "function": fn})
    return out


def tool_choice(choice: Mapping[str, Any] | None, has_tools: bool) -> tuple[Any, bool]:
    """Anthropic tool_choice to (OpenAI tool_choice, parallel_tool_calls)."""
    if choice is None:
        return None, True
    kind = choice.get("type")
    parallel = not choice.get("disable_parallel_tool_use", False)
    if kind == "auto":
        return "auto", parallel
    if kind == "none":
        return "none", parallel
    if kind == "any":
        return "required", parallel
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str):
            raise APIError(400, "tool_choice of type 'tool' needs a name")
        if not has_tools:
            raise APIError(400, f"tool_choice names '{name}' but no tools are given")
        return {"type": "function", "function": {"name": name}}, parallel
    raise APIError(400, "tool_choice.type must be 'auto', 'any', 'tool' or 'none'")
