"""llama-cpp-python's ``llama_cpp.llama``: the ``Llama`` class and what travels with it."""

from pyllama.compat.llama_cpp import (
    BaseLlamaCache,
    Llama,
    LlamaCache,
    LlamaDiskCache,
    LlamaGrammar,
    LlamaRAMCache,
    LlamaState,
    LlamaTokenizer,
    LogitsProcessor,
    LogitsProcessorList,
    MinTokensLogitsProcessor,
    StoppingCriteria,
    StoppingCriteriaList,
)
from pyllama.compat.llama_cpp.types import *  # noqa: F403

__all__ = [
    "BaseLlamaCache",
    "Llama",
    "LlamaCache",
    "LlamaDiskCache",
    "LlamaGrammar",
    "LlamaRAMCache",
    "LlamaState",
    "LlamaTokenizer",
    "LogitsProcessor",
    "LogitsProcessorList",
    "MinTokensLogitsProcessor",
    "StoppingCriteria",
    "StoppingCriteriaList",
]
