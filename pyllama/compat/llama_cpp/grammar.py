"""llama-cpp-python's ``llama_cpp.llama_grammar``: GBNF grammars and JSON-schema conversion."""

from pyllama.llama.grammar import JSON_GBNF, LlamaGrammar, json_schema_to_gbnf

__all__ = ["JSON_GBNF", "LlamaGrammar", "json_schema_to_gbnf"]
