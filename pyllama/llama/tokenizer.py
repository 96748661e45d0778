"""Tokens as llama-cpp-python handles them: bytes out of ``detokenize``, prompts with
BOS and special tokens parsed, fill-in-the-middle prompts for ``suffix``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

from pyllama import _core

__all__ = ["LlamaTokenizer", "detokenize_bytes", "prompt_tokens"]

Prompt = Union[str, Sequence[int]]


def detokenize_bytes(model: _core.Model, tokens: Sequence[int], special: bool = False) -> bytes:
    """The pieces joined; one leading space dropped when the first token is BOS (the
    space an SPM tokenizer put before the first word), as llama-cpp-python."""
    out = b"".join(model.token_to_piece(int(t), special) for t in tokens)
    if tokens and int(tokens[0]) == model.token_bos and out[:1] == b" ":
        return out[1:]
    return out


def _check_ids(model: _core.Model, tokens: Sequence[int]) -> list[int]:
    out = [int(t) for t in tokens]
    for t in out:
        if not 0 <= t < model.n_vocab:
            raise ValueError(f"token id {t} outside the vocabulary [0, {model.n_vocab})")
    return out


def prompt_tokens(model: _core.Model, prompt: Prompt, suffix: str | None = None) -> list[int]:
    """A str prompt gets BOS (when the model wants it) with special tokens parsed; a list of
    ids is used as given. With ``suffix``: a fill-in-the-middle prompt from the model's
    FIM tokens (ValueError when it has none)."""
    if suffix is not None:
        pre, suf, mid = model.token_fim_pre, model.token_fim_suf, model.token_fim_mid
        if min(pre, suf, mid) < 0:
            raise ValueError(
                "suffix needs a model with fill-in-the-middle tokens; this one has none"
            )
        head = (
            model.tokenize(prompt, False, False)
            if isinstance(prompt, str)
            else _check_ids(model, prompt)
        )
        bos = [model.token_bos] if model.add_bos and model.token_bos >= 0 else []
        return [*bos, pre, *head, suf, *model.tokenize(suffix, False, False), mid]
    if isinstance(prompt, str):
        tokens = model.tokenize_prompt(prompt)
        return tokens or [model.token_bos]
    tokens = _check_ids(model, prompt)
    if not tokens:
        raise ValueError("the prompt is empty")
    return tokens


class LlamaTokenizer:
    """``Llama.tokenizer()``: str in and out."""

    def __init__(self, llama: Any) -> None:
        self._model: _core.Model = llama.model

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> list[int]:
        return self._model.tokenize(text.decode("utf-8"), add_bos, special)

    def detokenize(
        self, tokens: Sequence[int], prev_tokens: Sequence[int] | None = None, special: bool = False
    ) -> bytes:
        return detokenize_bytes(self._model, tokens, special)

    def encode(self, text: str, add_bos: bool = True, special: bool = True) -> list[int]:
        return self._model.tokenize(text, add_bos, special)

    def decode(self, tokens: Sequence[int]) -> str:
        return detokenize_bytes(self._model, tokens).decode("utf-8", errors="ignore")

    @classmethod
    def from_ggml_file(cls, path: str) -> LlamaTokenizer:
        from pyllama.llama.llama import Llama

        return cls(Llama(model_path=path, vocab_only=True, verbose=False))
