"""A generation prompt's tokens, as llama.cpp's common_sampler_init feeds them to a chat's
grammar and reasoning budget before sampling."""

from __future__ import annotations

from pyllama import _core

__all__ = ["prefill_tokens"]


def prefill_tokens(model: _core.Model, generation_prompt: str) -> list[int]:
    """The generation prompt's tokens, as llama.cpp's common_sampler_init: a leading token
    that is only a space some tokenizers add is left out."""
    tokens = model.tokenize(generation_prompt, False, True)
    if tokens and not generation_prompt[:1].isspace():
        first = model.token_to_piece(tokens[0], True)
        if first[:1].isspace():
            tokens = tokens[1:]
    return tokens
