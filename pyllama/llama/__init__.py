"""llama-cpp-python's high-level API: ``Llama`` (one context, the low-level loop too),
``AsyncLlama`` and ``BatchedLlama`` (the batching engine: concurrent callers share
decode steps), grammars, caches and per-token hooks."""

from pyllama.llama.async_llama import AsyncLlama
from pyllama.llama.batched_llama import BatchedLlama
from pyllama.llama.cache import BaseLlamaCache, LlamaCache, LlamaDiskCache, LlamaRAMCache
from pyllama.llama.grammar import LlamaGrammar
from pyllama.llama.llama import Llama
from pyllama.llama.processors import (
    LogitsProcessor,
    LogitsProcessorList,
    MinTokensLogitsProcessor,
    StoppingCriteria,
    StoppingCriteriaList,
)
from pyllama.llama.state import LlamaState
from pyllama.llama.tokenizer import LlamaTokenizer

__all__ = [
    "AsyncLlama",
    "BaseLlamaCache",
    "BatchedLlama",
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
