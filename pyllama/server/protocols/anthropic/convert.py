"""Anthropic request pieces (system, content blocks, tools, tool_choice) to the OpenAI
shapes the chat pipeline takes, as llama-server's ``server_chat_convert_anthropic_to_oai``
does, but refusing what the model cannot take (documents, server tools) with a 400
instead of a 500. Image blocks become OpenAI image parts, which the media pipeline loads
(a 400 there when the model has no vision projector)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from pyllama.server.http.errors import APIError
from pyllama.server.media.content import image_part

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


def _image(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """An image block (base64 or URL source) as an OpenAI image part."""
    source = block.get("source")
    kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "base64":
        assert isinstance(source, Mapping)
        data, media_type = source.get("data"), source.get("media_type", "image/jpeg")
        if not isinstance(data, str) or not isinstance(media_type, str):
            raise APIError(400, f"{where}.source: a base64 source needs string data and media_type")
        return image_part(f"data:{media_type};base64,{data}")
    if kind == "url":
        assert isinstance(source, Mapping)
        url = source.get("url")
        if not isinstance(url, str):
            raise APIError(400, f"{where}.source.url must be a string")
        return image_part(url)
    raise APIError(400, f"{where}.source.type must be 'base64' or 'url'")


def _content(parts: list[dict[str, Any]]) -> Any:
    """Text blocks joined as before; with images, OpenAI content parts in block order."""
    if any(p["type"] != "text" for p in parts):
        return parts
    return "".join(p["text"] for p in parts)


def _tool_result(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise APIError(400, f"{where}.tool_use_id must be a string")
    content = block.get("content", "")
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "image":
                parts.append(_image(part, f"{where}.content[{j}]"))
            elif kind == "text":
                parts.append({"type": "text", "text": _text(part, f"{where}.content[{j}]")})
            else:
                raise _unsupported(str(kind), f"{where}.content[{j}]")
        content = _content(parts)
    elif content is None:
        content = ""
    elif not isinstance(content, str):
        raise APIError(400, f"{where}.content must be a string or an array of text blocks")
    if block.get("is_error"):
        content = f"Error: {content}" if isinstance(content, str) else content
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _message(msg: Any, i: int) -> list[dict[str, Any]]:
    """One Anthropic message to OpenAI messages: tool_result blocks become ``tool``
    messages, put first (they answer the assistant's calls just before)."""
    where = f"messages[{i}]"
    if not isinstance(msg, Mapping):
        raise APIError(400, f"{where} must be an object")
    role = msg.get("role")
    if role not in ("user", "assistant"):
        raise APIError(400, f"{where}.role must be 'user' or 'assistant'")
    content = msg.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise APIError(400, f"{where}.content must be a string or an array of content blocks")
    texts: list[dict[str, Any]] = []  # text blocks and images, as OpenAI parts
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            texts.append({"type": "text", "text": _text(block, at)})
        elif kind == "image":
            texts.append(_image(block, at))
        elif kind == "thinking":
            reasoning.append(str(block.get("thinking") or ""))
        elif kind == "redacted_thinking":
            continue  # encrypted elsewhere; nothing a local model can read
        elif kind == "tool_use":
            name, args = block.get("name"), block.get("input", {})
            if not isinstance(name, str) or not isinstance(args, Mapping):
                raise APIError(400, f"{at}: tool_use needs a name and an input object")
            calls.append(
                {
                    "id": str(block.get("id") or ""),
                    "type": "function",
                    "function": {"name": name, "arguments": orjson.dumps(args).decode()},
                }
            )
        elif kind == "tool_result":
            results.append(_tool_result(block, at))
        elif isinstance(kind, str) and (kind in _UNSUPPORTED or kind.endswith("_tool_result")):
            raise _unsupported(kind, at)
        else:
            raise APIError(400, f"{at}: unknown content block type {kind!r}")
    out: list[dict[str, Any]] = []
    if texts or calls or reasoning:
        m: dict[str, Any] = {"role": role, "content": _content(texts)}
        if calls:
            m["tool_calls"] = calls
        if reasoning:
            m["reasoning_content"] = "".join(reasoning)
        out.append(m)
    return results + out


def to_openai_messages(system: Any, messages: list[Any]) -> list[dict[str, Any]]:
    out = []
    text = _system(system)
    if text is not None:
        out.append({"role": "system", "content": text})
    for i, msg in enumerate(messages):
        out += _message(msg, i)
    return out


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
