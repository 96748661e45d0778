"""What every llama-cpp-python front answers from the model alone (``Llama``,
``AsyncLlama``, ``BatchedLlama``): loading it from the constructor's keywords, its
sizes and special tokens, tokens to bytes and back, and the chat template."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from pyllama import _core
from pyllama.llama import options
from pyllama.llama.chat import handlers
from pyllama.llama.chat.formats import FORMATS, resolve_template
from pyllama.llama.tokenizer import LlamaTokenizer, detokenize_bytes

__all__ = ["ModelInfo", "load_model"]


def load_model(
    model_path: str,
    *,
    verbose: bool,
    n_gpu_layers: int,
    split_mode: int,
    main_gpu: int,
    tensor_split: Sequence[float] | None,
    use_mmap: bool,
    use_mlock: bool,
    kv_overrides: Mapping[str, bool | int | float | str] | None,
    vocab_only: bool = False,
) -> _core.Model:
    """llama-cpp-python's model keywords to a loaded Model (ValueError for a missing file)."""
    if not os.path.exists(model_path):
        raise ValueError(f"Model path does not exist: {model_path}")
    if verbose:
        _core.set_log_level(2)
    return _core.Model(
        model_path,
        n_gpu_layers=n_gpu_layers,
        use_mmap=use_mmap,
        use_mlock=use_mlock,
        vocab_only=vocab_only,
        split_mode=options.split_mode_name(split_mode),
        main_gpu=main_gpu,
        tensor_split=options.tensor_split_list(tensor_split),
        kv_overrides=options.kv_override_strings(kv_overrides),
    )


class ModelInfo:
    """Needs ``_model`` and ``_n_ctx`` set by the subclass."""

    _model: _core.Model
    _n_ctx: int

    @property
    def model(self) -> _core.Model:
        return self._model

    def n_ctx(self) -> int:
        return self._n_ctx

    @property
    def _is_recurrent(self) -> bool:  # llama-cpp-python's attribute (its tests read it)
        return self._model.is_recurrent

    @property
    def _is_hybrid(self) -> bool:
        return self._model.is_hybrid

    def n_embd(self) -> int:
        return self._model.n_embd

    def n_vocab(self) -> int:
        return self._model.n_vocab

    def token_bos(self) -> int:
        return self._model.token_bos

    def token_eos(self) -> int:
        return self._model.token_eos

    def token_nl(self) -> int:
        return self._model.token_nl

    def tokenize(self, text: bytes | str, add_bos: bool = True, special: bool = False) -> list[int]:
        """Token ids of ``text`` (bytes as llama-cpp-python; a str is taken too)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return self._model.tokenize(text, add_bos, special)

    def detokenize(
        self, tokens: Sequence[int], prev_tokens: Sequence[int] | None = None, special: bool = False
    ) -> bytes:
        return detokenize_bytes(self._model, tokens, special)

    def tokenizer(self) -> LlamaTokenizer:
        return LlamaTokenizer(self)

    def _resolve_chat(self, chat_format: str | None) -> Any:
        """Sets ``chat_format`` (the resolved name) and ``_template``."""
        if chat_format is not None and getattr(self, "chat_handler", None) is None:
            handler = handlers.lookup(chat_format, templated=chat_format in FORMATS)
            if handler is not None:  # a registered format: the template is not used
                self.chat_handler = handler
                self.chat_format = chat_format
                self._template = resolve_template(self._model, None)[1]
                return
        self.chat_format, self._template = resolve_template(self._model, chat_format)
