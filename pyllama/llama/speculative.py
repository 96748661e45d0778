"""Draft models for ``Llama(draft_model=...)``: given the tokens so far, a few tokens the
model is likely to produce next. ``Llama.generate`` evaluates them with the sampled token
in one batch and keeps the prefix its own sampling agrees with, so the output is what it
would be without a draft; only the number of decodes changes.

``LlamaPromptLookupDecoding`` drafts by prompt lookup: the latest n-gram's most recent
earlier occurrence, and what followed it (llama-cpp-python's class of the same name)."""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["LlamaDraftModel", "LlamaPromptLookupDecoding"]


class LlamaDraftModel(abc.ABC):
    @abc.abstractmethod
    def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
        """Up to a few token ids to follow ``input_ids`` (may be empty)."""


class LlamaPromptLookupDecoding(LlamaDraftModel):
    def __init__(self, max_ngram_size: int = 2, num_pred_tokens: int = 10) -> None:
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens

    @staticmethod
    def find_candidate_pred_tokens(
        input_ids: npt.NDArray[np.intc], max_ngram_size: int, num_pred_tokens: int
    ) -> npt.NDArray[np.intc]:
        """For n from ``max_ngram_size`` down to 1: the first earlier place where the last
        n tokens occur, and up to ``num_pred_tokens`` tokens after it; empty when no n-gram
        recurs."""
        ids = np.asarray(input_ids)
        length = ids.shape[0]
        for n in range(min(max_ngram_size, length - 1), 0, -1):
            tail = ids[length - n :]
            # every window of n tokens that ends before the last token
            windows = np.lib.stride_tricks.sliding_window_view(ids[: length - 1], n)
            hits = np.flatnonzero((windows == tail).all(axis=1))
            for start in hits:
                follow = ids[start + n : start + n + num_pred_tokens]
                if follow.size:
                    return follow.astype(np.intc)
        return np.array([], dtype=np.intc)

    def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
        return self.find_candidate_pred_tokens(
            input_ids, max_ngram_size=self.max_ngram_size, num_pred_tokens=self.num_pred_tokens
        )
