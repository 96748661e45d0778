"""``LlamaState``: a snapshot of a ``Llama``'s sequence (``save_state``/``load_state``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["LlamaState"]


class LlamaState:
    """The evaluated tokens, their logits (with ``logits_all``), the KV cache bytes and the
    seed: everything ``load_state`` needs to continue as if nothing happened in between.
    Plain attributes, picklable."""

    def __init__(
        self,
        input_ids: npt.NDArray[np.intc],
        scores: npt.NDArray[np.single],
        n_tokens: int,
        llama_state: bytes,
        llama_state_size: int,
        seed: int,
    ) -> None:
        self.input_ids = input_ids
        self.scores = scores
        self.n_tokens = n_tokens
        self.llama_state = llama_state
        self.llama_state_size = llama_state_size
        self.seed = seed
