"""A base-size BERT encoder with random weights, for timing: all-MiniLM-L6-v2's tokenizer
and metadata, but 768 wide, 12 layers and a 3,072-wide FFN (the shape of bge-base and
all-mpnet-base), F16 like the MiniLM GGUF. Its vectors mean nothing; its compute is a base
encoder's, which no model this project can ship at run time has.

    python benchmarks/random_base_encoder.py OUT.gguf
    python benchmarks/bench_embeddings.py --model OUT.gguf --llama-server ...
"""

from __future__ import annotations

import argparse

import gguf
import numpy as np
from servers import encoder_model

WIDTH, LAYERS, FFN, HEADS = 768, 12, 3072, 12
SHAPE = {
    "bert.embedding_length": WIDTH,
    "bert.block_count": LAYERS,
    "bert.feed_forward_length": FFN,
    "bert.attention.head_count": HEADS,
}
T = gguf.GGUFValueType


def _value(field: gguf.ReaderField) -> object:
    kind = field.types[0]
    if kind == T.ARRAY:
        if field.types[1] == T.STRING:
            return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        return [field.parts[i][0].item() for i in field.data]
    if kind == T.STRING:
        return bytes(field.parts[field.data[0]]).decode()
    return field.parts[field.data[0]][0].item()


def write(out: str, seed: int = 0) -> None:
    src = gguf.GGUFReader(encoder_model(False))
    w = gguf.GGUFWriter(out, "bert")
    for f in src.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        kind = f.types[0]
        value = SHAPE.get(f.name, _value(f))
        sub = f.types[1] if kind == T.ARRAY else None
        w.add_key_value(f.name, value, kind, sub_type=sub)
    rng = np.random.default_rng(seed)

    def tensor(name: str, *shape: int, f16: bool = False) -> None:
        # gguf's shapes list the fastest dimension first; numpy's last
        a = (rng.standard_normal(shape[::-1]) * 0.02).astype(np.float16 if f16 else np.float32)
        if name.endswith("norm.weight"):
            a[:] = 1.0
        w.add_tensor(name, a)

    tensor("token_embd_norm.bias", WIDTH)
    tensor("token_embd_norm.weight", WIDTH)
    tensor("position_embd.weight", WIDTH, 512)
    tensor("token_types.weight", WIDTH, 2)
    tensor("token_embd.weight", WIDTH, 30522, f16=True)
    for i in range(LAYERS):
        p = f"blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(p + name + ".weight", WIDTH, WIDTH, f16=True)
            tensor(p + name + ".bias", WIDTH)
        tensor(p + "attn_output_norm.weight", WIDTH)
        tensor(p + "attn_output_norm.bias", WIDTH)
        tensor(p + "ffn_up.weight", WIDTH, FFN, f16=True)
        tensor(p + "ffn_up.bias", FFN)
        tensor(p + "ffn_down.weight", FFN, WIDTH, f16=True)
        tensor(p + "ffn_down.bias", WIDTH)
        tensor(p + "layer_output_norm.weight", WIDTH)
        tensor(p + "layer_output_norm.bias", WIDTH)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the GGUF to write")
    write(ap.parse_args().out)


if __name__ == "__main__":
    main()
