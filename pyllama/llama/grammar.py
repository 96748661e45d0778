"""``LlamaGrammar``: a GBNF grammar as llama-cpp-python passes it around.

As in llama-cpp-python 0.3.36 the object holds the text: llama.cpp parses it when a call
builds its sampler, before anything is decoded, and a mistake is a ValueError there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyllama import _core

__all__ = ["JSON_GBNF", "LlamaGrammar", "json_schema_to_gbnf"]

# any JSON value, as llama.cpp's grammars/json.gbnf
JSON_GBNF = r"""root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [1-9] [0-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
"""


def json_schema_to_gbnf(schema: str | dict[str, Any], prop_order: list[str] | None = None) -> str:
    """GBNF for a JSON schema (text or dict), by llama.cpp's converter."""
    if prop_order:
        raise ValueError("prop_order is not supported: order the schema's properties instead")
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return _core.json_schema_to_grammar(text)


class LlamaGrammar:
    """A GBNF grammar; pass it as ``grammar=`` to completions, chat and ``generate``."""

    def __init__(self, *args: Any, _grammar: str, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError("build a LlamaGrammar with from_string, from_file or from_json_schema")
        self._grammar = _grammar
        self._root = "root"

    @property
    def grammar(self) -> str:
        return self._grammar

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> LlamaGrammar:
        if not isinstance(grammar, str):
            raise TypeError("grammar must be a string (GBNF)")
        if not grammar.strip():
            raise ValueError("the grammar is empty")
        return cls(_grammar=grammar)

    @classmethod
    def from_file(cls, file: str | Path, verbose: bool = True) -> LlamaGrammar:
        try:
            text = Path(file).read_text(encoding="utf-8")  # not the locale's (Windows)
        except Exception as e:
            raise Exception(f"{cls.from_file.__qualname__}: error reading grammar file: {e}") from e
        if not text:
            raise ValueError(f"{cls.from_file.__qualname__}: error parsing grammar file: empty")
        return cls.from_string(text, verbose=verbose)

    @classmethod
    def from_json_schema(cls, json_schema: str, verbose: bool = True) -> LlamaGrammar:
        """A grammar for JSON documents matching ``json_schema`` (JSON text, as
        llama-cpp-python; a dict is accepted too)."""
        return cls(_grammar=json_schema_to_gbnf(json_schema))

    def __repr__(self) -> str:
        return f"LlamaGrammar({self._grammar[:40]!r}...)"
