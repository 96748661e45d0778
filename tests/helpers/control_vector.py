"""Write a control vector GGUF (llama.cpp's format: one ``direction.<layer>`` f32 tensor of
n_embd values per layer, layers from 1) with the ``gguf`` package: a random direction,
strong enough to change what the model says."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

__all__ = ["write_control_vector"]


def write_control_vector(
    path: Path, n_embd: int, n_layer: int, magnitude: float = 4.0, seed: int = 0
) -> Path:
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "controlvector")
    w.add_string("controlvector.model_hint", "llama")
    w.add_int32("controlvector.layer_count", n_layer)
    for layer in range(1, n_layer + 1):
        direction = rng.standard_normal(n_embd).astype(np.float32) * magnitude
        w.add_tensor(f"direction.{layer}", direction)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
