"""llama-cpp-python's ``chatml-function-calling`` format: ChatML with the functions listed
in a system message; a named ``tool_choice`` (or legacy ``function_call``) makes the reply
that function's arguments, held to its JSON schema by a grammar, and answers as a tool call.
Without one the model answers in text (llama-cpp-python's grammar that lets it pick a
function or a message is not reproduced). Chats without a chat format go through
llama.cpp's chat layer instead (``pyllama.chat``), as pyllama-server's do."""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Mapping, Sequence
from typing import Any

from pyllama import _core
from pyllama.llama.chat import handlers as _registry

__all__ = ["chatml_function_calling"]

_ALNUM = string.ascii_letters + string.digits


def _tools(call: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """(the functions, the name the call forces or None)."""
    functions = call.get("functions")
    if functions is not None:
        forced = call.get("function_call")
        name = forced.get("name") if isinstance(forced, Mapping) else None
        return [dict(f) for f in functions], name
    tools = call.get("tools") or []
    choice = call.get("tool_choice")
    name = None
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
    return [dict(t.get("function") or {}) for t in tools], name


def _prompt(messages: Sequence[Mapping[str, Any]], functions: list[dict[str, Any]]) -> str:
    system = "".join(
        f"\nfunctions.{f.get('name')}:\n{json.dumps(f.get('parameters') or {})}\n"
        for f in functions
    )
    out = []
    if functions:
        out.append(f"<|im_start|>system\nYou can call these functions:{system}<|im_end|>\n")
    for m in messages:
        content = m.get("content")
        text = content if isinstance(content, str) else ""
        out.append(f"<|im_start|>{m.get('role')}\n{text}<|im_end|>\n")
    return "".join(out) + "<|im_start|>assistant\n"


def chatml_function_calling(*, llama: Any, messages: Any, **call: Any) -> Any:
    if call.get("stream"):
        raise ValueError("chatml-function-calling answers whole replies only (stream=False)")
    functions, name = _tools(call)
    chosen = next((f for f in functions if f.get("name") == name), None)
    if name is not None and chosen is None:
        raise ValueError(f"tool_choice names '{name}', which is not among the tools")
    prompt = _prompt(messages, functions)
    if chosen is not None:
        prompt += f"functions.{name}:\n"
    kwargs: dict[str, Any] = {
        k: call[k]
        for k in ("temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "repeat_penalty")
        if call.get(k) is not None
    }
    if chosen is not None:
        schema = chosen.get("parameters") or {"type": "object"}
        kwargs["grammar"] = _core.json_schema_to_grammar(json.dumps(schema))
    done = llama.create_completion(prompt=prompt, stop=["<|im_end|>"], **kwargs)
    text = done["choices"][0]["text"]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    finish = done["choices"][0]["finish_reason"]
    if chosen is not None:
        call_id = "call_" + "".join(secrets.choice(_ALNUM) for _ in range(24))
        fn = {"name": name, "arguments": text}
        message = {
            "role": "assistant",
            "content": None,
            "function_call": fn,
            "tool_calls": [{"id": call_id, "type": "function", "function": fn}],
        }
        finish = "tool_calls"
    return {
        "id": "chat" + done["id"],
        "object": "chat.completion",
        "created": done["created"],
        "model": done["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": done["usage"],
    }


_registry.register("chatml-function-calling", chatml_function_calling, builtin=True)
