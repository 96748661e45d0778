"""Test models derived from the real ones with the ``gguf`` package, cached next to them.

* ``fim_model``: SmolLM2 with fill-in-the-middle tokens declared. SmolLM2's vocabulary has
  no FIM tokens, so some of its unused special tokens are named FIM prefix/suffix/middle/
  separator/repo in the metadata: /infill then runs real generation with llama-server's
  prompt layout (what the model makes of it is not the point).
* ``rerank_model``: all-MiniLM-L6-v2 with a random (fixed-seed) classification head and rank
  pooling: llama.cpp's reranker graph on a real encoder. Scores are real outputs of that
  graph, not meaningful relevance.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import gguf
import numpy as np

__all__ = ["FIM_TOKENS", "fim_model", "rerank_model"]

FIM_TOKENS = {"fim_pre": 8, "fim_suf": 9, "fim_mid": 10, "fim_sep": 5, "fim_rep": 4}


def _publish(target: Path, write) -> str:
    if target.is_file():
        return str(target)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
    try:
        write(part)
        os.replace(part, target)  # concurrent test workers never see a partial file
    finally:
        part.unlink(missing_ok=True)
    return str(target)


def fim_model(smollm_path: str) -> str:
    src = Path(smollm_path)
    args = []
    for kind, tok in FIM_TOKENS.items():
        args += ["--special-token-by-id", kind, str(tok)]

    def write(part: Path) -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gguf.scripts.gguf_new_metadata",
                *args,
                "--force",
                str(src),
                str(part),
            ],
            check=True,
            capture_output=True,
        )

    return _publish(src.with_name(src.stem + ".fim.gguf"), write)


def rerank_model(minilm_path: str, seed: int = 0) -> str:
    src = Path(minilm_path)

    def write(part: Path) -> None:
        reader = gguf.GGUFReader(str(src))
        arch = "bert"
        writer = gguf.GGUFWriter(str(part), arch)
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE:
                continue
            if field.name == f"{arch}.pooling_type":
                continue
            value = field.contents()
            vtype = field.types[0]
            if vtype == gguf.GGUFValueType.ARRAY:
                writer.add_key_value(field.name, value, vtype, sub_type=field.types[-1])
            else:
                writer.add_key_value(field.name, value, vtype)
        writer.add_pooling_type(gguf.PoolingType.RANK)
        for t in reader.tensors:
            writer.add_tensor(
                t.name, t.data, raw_dtype=t.tensor_type, raw_shape=list(reversed(t.shape.tolist()))
            )
        n_embd = int(reader.fields[f"{arch}.embedding_length"].contents())
        rng = np.random.default_rng(seed)
        scale = 1.0 / np.sqrt(n_embd)
        writer.add_tensor(
            "cls.weight", (rng.standard_normal((n_embd, n_embd)) * scale).astype(np.float32)
        )
        writer.add_tensor("cls.bias", np.zeros(n_embd, dtype=np.float32))
        writer.add_tensor(
            "cls.output.weight", (rng.standard_normal((1, n_embd)) * scale).astype(np.float32)
        )
        writer.add_tensor("cls.output.bias", np.zeros(1, dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    return _publish(src.with_name(src.stem + f".rerank{seed}.gguf"), write)
