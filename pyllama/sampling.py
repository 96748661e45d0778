"""Keyword arguments (OpenAI and llama-server names) to a validated ``SamplingParams``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pyllama import _core

__all__ = ["grammar_for_response_format", "json_schema_grammar", "make_sampling_params"]

# public name -> SamplingParams field (identity unless renamed)
_FIELDS = {
    "seed": "seed",
    "min_keep": "min_keep",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "xtc_probability": "xtc_probability",
    "xtc_threshold": "xtc_threshold",
    "typical_p": "typical_p",
    "temperature": "temperature",
    "temp": "temperature",
    "dynatemp_range": "dynatemp_range",
    "dynatemp_exponent": "dynatemp_exponent",
    "repeat_last_n": "repeat_last_n",
    "repeat_penalty": "repeat_penalty",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "dry_multiplier": "dry_multiplier",
    "dry_base": "dry_base",
    "dry_allowed_length": "dry_allowed_length",
    "dry_penalty_last_n": "dry_penalty_last_n",
    "dry_sequence_breakers": "dry_sequence_breakers",
    "mirostat": "mirostat",
    "mirostat_mode": "mirostat",
    "mirostat_tau": "mirostat_tau",
    "mirostat_eta": "mirostat_eta",
    "top_n_sigma": "top_n_sigma",
    "adaptive_target": "adaptive_target",
    "adaptive_decay": "adaptive_decay",
    "ignore_eos": "ignore_eos",
    "samplers": "samplers",
    "backend_sampling": "backend_sampling",
}


def json_schema_grammar(schema: Mapping[str, Any] | str) -> str:
    """GBNF for a JSON schema (dict or JSON text); ValueError when the schema is invalid."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return _core.json_schema_to_grammar(text)


def grammar_for_response_format(fmt: Mapping[str, Any] | None) -> str | None:
    """OpenAI ``response_format`` to GBNF (None for plain text)."""
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or not isinstance(fmt.get("type"), str):
        raise ValueError("response_format must be an object with a 'type'")
    kind = fmt["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return json_schema_grammar(fmt.get("schema") or {"type": "object"})
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, Mapping):
            raise ValueError("response_format.json_schema must be an object")
        schema = spec.get("schema", spec)
        if not isinstance(schema, Mapping):
            raise ValueError("response_format.json_schema.schema must be an object")
        return json_schema_grammar(schema)
    raise ValueError(f"unknown response_format type '{kind}' (text, json_object, json_schema)")


def make_sampling_params(
    *,
    grammar: str | None = None,
    json_schema: Any = None,
    logit_bias: Mapping[Any, float] | None = None,
    **kwargs: Any,
) -> _core.SamplingParams:
    """Build SamplingParams from keyword arguments; unknown names raise TypeError."""
    p = _core.SamplingParams()
    for name, value in kwargs.items():
        if value is None:
            continue
        field = _FIELDS.get(name)
        if field is None:
            raise TypeError(f"unknown sampling parameter '{name}'")
        try:
            setattr(p, field, value)
        except TypeError as e:
            raise ValueError(f"invalid type for '{name}': {type(value).__name__}") from e
    if grammar is not None and json_schema is not None:
        raise ValueError("pass either grammar or json_schema, not both")
    if json_schema is not None:
        p.grammar = json_schema_grammar(json_schema)
    elif grammar is not None:
        if not isinstance(grammar, str):
            raise ValueError("grammar must be a string (GBNF)")
        p.grammar = grammar
    if logit_bias:
        pairs = []
        for tok, bias in logit_bias.items():
            try:
                pairs.append((int(tok), float(bias)))
            except (TypeError, ValueError) as e:
                raise ValueError(
                    f"logit_bias entry {tok!r}: {bias!r} is not token id -> number"
                ) from e
        p.logit_bias = pairs
    p.validate()
    return p
