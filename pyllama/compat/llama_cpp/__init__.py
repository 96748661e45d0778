"""llama-cpp-python's high-level API on pyllama, for a one-line move:

    import pyllama.compat.llama_cpp as llama_cpp      # was: import llama_cpp
    from pyllama.compat.llama_cpp import Llama        # was: from llama_cpp import Llama

or, leaving the code as it is, ``pyllama.compat.as_llama_cpp.install()`` (or ``python -m
pyllama.compat.as_llama_cpp script.py``) makes ``import llama_cpp`` itself resolve here.

``Llama`` is ``pyllama.Llama``; ``LlamaGrammar``, the caches, ``LlamaState``, the
processor and stopping-criteria lists and ``LlamaTokenizer`` keep their names, as do the
submodules ``llama``, ``llama_types`` (the TypedDicts, re-exported here as by
llama-cpp-python), ``llama_chat_format`` (formatters, ``register_chat_format``, Hugging
Face tokenizer-config formatters), ``llama_speculative`` (``LlamaPromptLookupDecoding``
for ``Llama(draft_model=...)``), ``llama_grammar``, ``llama_cache`` and
``llama_tokenizer``. Not here: llama-cpp-python's low-level ctypes API
(``llama_cpp.llama_*`` functions, ``LLAMA_*`` constants beyond the few below,
``llama_cpp._internals``, ``Llama._ctx``/``_model`` as ctypes wrappers): pyllama binds
llama.cpp with pybind11, and a ctypes mirror of llama.h would pin user code to one
llama.cpp ABI; the multimodal chat handler classes (multimodal chat goes through
pyllama-server's ``--mmproj``); ``LlamaHFTokenizer``.
"""

from __future__ import annotations

from pyllama import __version__
from pyllama.compat.llama_cpp import types as _types
from pyllama.compat.llama_cpp.types import *  # noqa: F403  (as llama_cpp exports them)
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
from pyllama.llama.speculative import LlamaDraftModel, LlamaPromptLookupDecoding

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
    "LlamaDraftModel",
    "LlamaPromptLookupDecoding",
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
    *_types.__all__,
]


def __getattr__(name: str) -> object:
    if name.startswith(("llama_", "LLAMA_", "GGML_", "ggml_", "mtmd_", "llava_")):
        raise AttributeError(
            f"llama_cpp.{name}: llama-cpp-python's low-level ctypes API is not part of pyllama "
            "(pyllama binds llama.cpp with pybind11: pyllama._core)"
        )
    raise AttributeError(f"module 'llama_cpp' has no attribute {name!r}")


# llama-cpp-python's submodule names (``llama_cpp.llama_types`` ...) for the modules here,
# importable under both (``import pyllama.compat.llama_cpp.llama_types`` and the alias's
# ``import llama_cpp.llama_types``): the files drop the prefix they would all share
def _submodule_names() -> None:
    import importlib
    import sys

    for short in ("types", "chat_format", "speculative", "grammar", "cache", "tokenizer"):
        module = importlib.import_module(f"{__name__}.{short}")
        sys.modules[f"{__name__}.llama_{short}"] = module
        globals()[f"llama_{short}"] = module


_submodule_names()
