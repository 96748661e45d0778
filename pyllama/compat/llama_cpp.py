"""llama-cpp-python's high-level names, for a one-line move:

    import pyllama.compat.llama_cpp as llama_cpp      # was: import llama_cpp
    from pyllama.compat.llama_cpp import Llama        # was: from llama_cpp import Llama

``Llama`` is ``pyllama.Llama``; ``LlamaGrammar``, the caches, ``LlamaState``, the
processor and stopping-criteria lists and ``LlamaTokenizer`` keep their names, and
``llama_types`` its TypedDicts' names as plain dicts. Not here: llama-cpp-python's
low-level ctypes API (``llama_cpp.llama_*`` functions, ``LLAMA_*`` constants beyond
the few below, ``llama_cpp._internals``), its chat handler classes (multimodal chat goes
through pyllama-server's ``--mmproj``), ``LlamaHFTokenizer`` and
``LlamaPromptLookupDecoding`` (``AsyncLlama(..., ngram=...)`` drafts by n-grams).
"""

from __future__ import annotations

from pyllama import __version__
from pyllama.engine import EngineError
from pyllama.llama import (
    AsyncLlama,
    BaseLlamaCache,
    BatchedLlama,
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
from pyllama.llama.grammar import JSON_GBNF, json_schema_to_gbnf
from pyllama.llama.options import GGML_TYPES

# the constants scripts pass to Llama(...)
LLAMA_DEFAULT_SEED = 0xFFFFFFFF
LLAMA_POOLING_TYPE_UNSPECIFIED = -1
LLAMA_POOLING_TYPE_NONE = 0
LLAMA_POOLING_TYPE_MEAN = 1
LLAMA_POOLING_TYPE_CLS = 2
LLAMA_POOLING_TYPE_LAST = 3
LLAMA_POOLING_TYPE_RANK = 4
LLAMA_SPLIT_MODE_NONE = 0
LLAMA_SPLIT_MODE_LAYER = 1
LLAMA_SPLIT_MODE_ROW = 2
globals().update({f"GGML_TYPE_{name.upper()}": value for value, name in GGML_TYPES.items()})

__all__ = [
    "JSON_GBNF",
    "AsyncLlama",
    "BaseLlamaCache",
    "BatchedLlama",
    "EngineError",
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
    "__version__",
    "json_schema_to_gbnf",
]
