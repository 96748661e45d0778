"""Write a small random LoRA adapter GGUF for a base GGUF model, with the ``gguf`` package.

What llama.cpp (src/llama-adapter.cpp) asks of an adapter file:

* ``general.type`` = "adapter", ``adapter.type`` = "lora", ``general.architecture`` equal
  to the base model's (else "model arch and LoRA arch mismatch");
* ``adapter.lora.alpha`` (f32, optional): the applied scale is ``scale * alpha / rank``
  when alpha is non-zero, plain ``scale`` when it is 0 or missing;
* tensors in pairs ``<base tensor name>.lora_a`` / ``.lora_b``, both present, the base
  tensor existing in the model (names ending ``_norm.weight`` are skipped, any other name
  fails the load);
* shapes in ggml order (ne0 first) for a base weight ``W`` of ne ``[n_in, n_out]``:
  ``lora_a`` ne ``[n_in, rank]`` and ``lora_b`` ne ``[rank, n_out]``, i.e. numpy arrays of
  shape ``(rank, n_in)`` and ``(n_out, rank)``; the graph adds
  ``scale * (B @ (A @ x))`` to ``W @ x`` (token_embd is the exception, not written here);
* any type ggml_mul_mat takes as its first operand: F32/F16 as convert_lora_to_gguf
  writes, or a block-quantized type (Q8_0, Q4_1...) where ne0 is a multiple of the block.
  On CPU an F32/F16 A is multiplied by tinyBLAS for batches of two or more rows and by
  vec_dot for one row, so its results depend (in the last bits) on what else is in the
  batch; a Q4_1 A, like the model's own weights, does not.

The weights are random (numpy, fixed seed): an adapter that changes what the model says,
not one that teaches it anything.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path

import gguf
import numpy as np

__all__ = ["base_weights", "write_lora"]

DEFAULT_TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down")

_BLOCK = re.compile(r"^blk\.\d+\.(?P<kind>[a-z_]+)\.weight$")


def base_weights(base_model_path: str | Path) -> tuple[str, dict[str, tuple[int, int]]]:
    """(architecture, {tensor name: (n_in, n_out)}) for the base model's 2-D block weights."""
    return _base_weights(str(Path(base_model_path).resolve()))


@functools.lru_cache(maxsize=4)
def _base_weights(path: str) -> tuple[str, dict[str, tuple[int, int]]]:
    # GGUFReader parses every metadata array (the vocabulary too): seconds, so cache it
    reader = gguf.GGUFReader(path)
    field = reader.fields.get("general.architecture")
    if field is None:
        raise ValueError(f"{path}: no general.architecture")
    arch = str(field.contents())
    shapes: dict[str, tuple[int, int]] = {}
    for t in reader.tensors:
        if len(t.shape) == 2 and _BLOCK.match(t.name):
            # GGUFReader gives ggml order: shape[0] = ne0 (input), shape[1] = ne1 (output)
            shapes[t.name] = (int(t.shape[0]), int(t.shape[1]))
    return arch, shapes


def write_lora(
    base_model_path: str | Path,
    out_path: str | Path,
    *,
    rank: int = 4,
    scale_of_b: float = 0.2,
    seed: int = 0,
    targets: Sequence[str] = DEFAULT_TARGETS,
    alpha: float | None = None,
    arch: str | None = None,
    a_type: str = "f32",
    b_type: str = "f32",
) -> Path:
    """Write a random LoRA adapter for ``base_model_path`` to ``out_path``; returns the path.

    ``targets`` are block weight kinds (``attn_q``, ``ffn_down``...), adapted in every layer.
    ``A`` has entries of standard deviation ``1/sqrt(n_in)`` and ``B`` of ``scale_of_b``.
    ``alpha`` defaults to ``rank``, so the adapter's scale is applied as is. ``arch``
    overrides the architecture written (to make an adapter for another model).
    ``a_type`` / ``b_type``: ggml type names of the tensors ("f32", "f16", "q8_0",
    "q5_1"...); a block-quantized type needs the tensor's ne0 (``n_in`` for A, ``rank``
    for B) to be a multiple of its block size.
    """
    if rank < 1:
        raise ValueError("rank must be >= 1")
    qa, qb = _ggml_type(a_type), _ggml_type(b_type)
    base_arch, shapes = base_weights(base_model_path)
    wanted = set(targets)
    chosen: dict[str, tuple[int, int]] = {}
    found: set[str] = set()
    for name, shape in shapes.items():
        m = _BLOCK.match(name)
        if m and m.group("kind") in wanted:
            chosen[name] = shape
            found.add(m.group("kind"))
    missing = wanted - found
    if missing:
        raise ValueError(f"no such block weights in the base model: {sorted(missing)}")

    rng = np.random.default_rng(seed)
    out = Path(out_path)
    writer = gguf.GGUFWriter(str(out), arch or base_arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(rank if alpha is None else alpha))
    for name in sorted(chosen):
        n_in, n_out = chosen[name]
        a = rng.standard_normal((rank, n_in)) / np.sqrt(n_in)
        b = rng.standard_normal((n_out, rank)) * scale_of_b
        _add(writer, f"{name}.lora_a", a, qa)
        _add(writer, f"{name}.lora_b", b, qb)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _ggml_type(name: str) -> gguf.GGMLQuantizationType:
    try:
        return gguf.GGMLQuantizationType[name.upper()]
    except KeyError:
        raise ValueError(f"unknown ggml type '{name}'") from None


def _add(writer: gguf.GGUFWriter, name: str, data: np.ndarray, qtype: gguf.GGMLQuantizationType):
    if qtype == gguf.GGMLQuantizationType.F32:
        writer.add_tensor(name, data.astype(np.float32))
    elif qtype == gguf.GGMLQuantizationType.F16:
        writer.add_tensor(name, data.astype(np.float16))
    else:
        block, _ = gguf.GGML_QUANT_SIZES[qtype]
        if data.shape[-1] % block:
            raise ValueError(f"{name}: ne0={data.shape[-1]} is not a multiple of {block}")
        raw = gguf.quants.quantize(data.astype(np.float32), qtype)
        writer.add_tensor(name, raw, raw_dtype=qtype)
