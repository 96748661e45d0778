"""pyllama: llama.cpp compiled, bound and served from Python."""

from pyllama._core import (
    Batch,
    Context,
    LlamaError,
    LoraAdapter,
    Model,
    Sampler,
    SamplingParams,
    __version__,
    build_sampler_chain,
    json_schema_to_grammar,
    system_info,
)
from pyllama.chat import ChatTemplate, ChatTemplateError
from pyllama.llama import Llama
from pyllama.models import demo_model

__all__ = [
    "Batch",
    "ChatTemplate",
    "ChatTemplateError",
    "Context",
    "Llama",
    "LlamaError",
    "LoraAdapter",
    "Model",
    "Sampler",
    "SamplingParams",
    "__version__",
    "build_sampler_chain",
    "demo_model",
    "json_schema_to_grammar",
    "system_info",
]
