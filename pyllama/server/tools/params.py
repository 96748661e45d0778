"""Reading a built-in tool's params the way llama-server does.

A required key that is missing or of the wrong type fails the whole request (llama-server
answers 400); an optional one of the wrong type falls back to its default, as upstream's
``json_value``."""

from __future__ import annotations

import math
from typing import Any


class ToolParamError(ValueError):
    """A required param is missing or has the wrong type (400 in llama-server)."""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def required(params: dict[str, Any], key: str) -> Any:
    if key not in params:
        raise ToolParamError(f"[json.exception.out_of_range.403] key '{key}' not found")
    return params[key]


def required_str(params: dict[str, Any], key: str) -> str:
    value = required(params, key)
    if not isinstance(value, str):
        raise ToolParamError(
            f"[json.exception.type_error.302] type must be string, but is {_json_type(value)}"
        )
    return value


def opt_str(params: dict[str, Any], key: str, default: str = "") -> str:
    value = params.get(key)
    return value if isinstance(value, str) else default


def opt_bool(params: dict[str, Any], key: str, default: bool = False) -> bool:
    value = params.get(key)
    return value if isinstance(value, bool) else default


def opt_int(params: dict[str, Any], key: str, default: int) -> int:
    # a JSON number converts to int as in nlohmann (floats truncate, booleans are 0/1)
    value = params.get(key)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return default


def prop(type_: str, description: str) -> dict[str, Any]:
    return {"type": type_, "description": description}


def function_def(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    """An OpenAI function definition, keys in llama-server's order."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        parameters["required"] = required
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
