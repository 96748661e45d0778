"""``Llama.context_params`` and ``Llama.model_params``: the values a ``Llama`` was made with,
under llama.h's field names. llama-cpp-python exposes its ctypes structs there and
integrations read them (LlamaIndex's ``LlamaCPP`` takes its context window from
``context_params.n_ctx``); here they are read-only records."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ContextParams", "ModelParams"]


@dataclass(frozen=True)
class ContextParams:
    n_ctx: int
    n_batch: int
    n_ubatch: int
    n_seq_max: int
    n_threads: int
    n_threads_batch: int
    embeddings: bool
    offload_kqv: bool
    flash_attn: bool


@dataclass(frozen=True)
class ModelParams:
    n_gpu_layers: int
    split_mode: int
    main_gpu: int
    vocab_only: bool
    use_mmap: bool
    use_mlock: bool
