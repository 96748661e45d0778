"""A rendered chat prompt to tokens, as llama-server tokenizes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["tokenize_chat"]


def tokenize_chat(model: Any, messages: Sequence[Mapping[str, Any]], prompt: str) -> list[int]:
    """Tokenize a rendered chat prompt as llama-server does (BOS if the model wants it,
    special tokens parsed), except that special-token text typed inside a message (a
    user writing '<|im_end|>') stays text: such contents are tokenized on their own
    without special parsing."""
    contents = [
        m["content"] for m in messages if isinstance(m.get("content"), str) and m["content"]
    ]
    # has_special_text is exact and cheap; the comparison keeps only contents whose
    # special-looking text really tokenizes differently
    risky = [
        c
        for c in contents
        if model.has_special_text(c)
        and model.tokenize(c, False, True) != model.tokenize(c, False, False)
    ]
    if not risky:
        return model.tokenize_prompt(prompt)
    tokens: list[int] = [model.token_bos] if model.add_bos else []
    pos = 0
    for c in risky:
        i = prompt.find(c, pos)
        if i < 0:
            continue  # the template rewrote this content; its specials were not from the user
        tokens += model.tokenize_prompt(prompt[pos:i], False)
        tokens += model.tokenize(c, False, False)
        pos = i + len(c)
    tokens += model.tokenize_prompt(prompt[pos:], False)
    return tokens
