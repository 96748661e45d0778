"""Convert a BERT sentence-embedding model (safetensors + its JSON configs) to GGUF.

The file matches what llama.cpp's ``convert_hf_to_gguf.py`` (class ``BertModel``) writes:
arch ``bert``, non-causal attention, the pooling of the sentence-transformers ``Pooling``
module, a WordPiece vocab rewritten to llama.cpp's "phantom space" form (``▁word`` for a
word start, ``##piece`` stored as ``piece``, control tokens as they are), and the same
tensor names and types (F16 matrices; F32 norms, biases, position and token-type tables).
Needs numpy and the ``gguf`` package only: no torch, no transformers.

Usage: ``python -m pyllama.convert_bert MODEL_DIR OUT.gguf``
"""

from __future__ import annotations

import json
import re
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pyllama._extras import MissingExtraError, require

__all__ = ["convert", "read_safetensors"]

# llama.cpp's converter names the pre-tokenizer from a hash of the HF tokenizer's output on
# a probe text. bge-small-en-v1.5 and jina-embeddings-v2-base-en hash alike, and its table
# maps that hash to "bert-bge" and then, later in the same chain of ifs, to "jina-v2-en": the
# last match wins. An uncased BERT vocab with the same normalizer (all-MiniLM-L6-v2 has
# bge's vocab.txt) gives that hash too. llama.cpp ignores this value for WordPiece vocabs.
TOKENIZER_PRE = "jina-v2-en"

_ST_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}

# token types, as gguf.TokenType
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED = 1, 2, 3, 4, 5

_GLOBAL_TENSORS = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.LayerNorm": "token_embd_norm",
}
_LAYER_TENSORS = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
_SPECIAL_KEYS = {  # tokenizer.ggml.<key> of each special token id, as llama.cpp reads them
    "bos": "bos_token_id",
    "eos": "eos_token_id",
    "unk": "unknown_token_id",
    "sep": "seperator_token_id",  # sic
    "pad": "padding_token_id",
    "cls": "cls_token_id",
    "mask": "mask_token_id",
}
_ALWAYS_F32 = ("position_embd.weight", "token_types.weight")
_SKIPPED = ("embeddings.position_ids", "pooler.", "cls.")  # unused for embeddings


def _gguf() -> Any:
    require("convert", "converting a model to GGUF")
    import gguf

    return gguf


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """All tensors of a ``.safetensors`` file as read-only, memory-mapped numpy arrays.

    BF16 tensors are widened to float32 (numpy has no bfloat16).
    """
    path = Path(path)
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = data[start:end]
        if info["dtype"] == "BF16":
            arr = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] in _ST_DTYPES:
            arr = raw.view(_ST_DTYPES[info["dtype"]])
        else:
            raise ValueError(f"{path.name}: {name} has unsupported dtype {info['dtype']}")
        out[name] = arr.reshape(info["shape"])
    return out


def _load_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _gguf_tensor_name(name: str) -> str | None:
    """GGUF name of an HF BERT tensor, None for tensors llama.cpp does not use."""
    name = name.removeprefix("bert.")
    if name.endswith(".gamma"):
        name = name[: -len("gamma")] + "weight"
    elif name.endswith(".beta"):
        name = name[: -len("beta")] + "bias"
    if name.startswith(_SKIPPED):
        return None
    base, _, suffix = name.rpartition(".")
    if base in _GLOBAL_TENSORS:
        return f"{_GLOBAL_TENSORS[base]}.{suffix}"
    m = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)", base)
    if m and m.group(2) in _LAYER_TENSORS:
        return f"blk.{m.group(1)}.{_LAYER_TENSORS[m.group(2)]}.{suffix}"
    raise ValueError(f"cannot map tensor {name!r} to a llama.cpp BERT tensor")


def _tensors(weights: Path, f16: bool) -> Iterator[tuple[str, np.ndarray]]:
    for name, arr in read_safetensors(weights).items():
        new = _gguf_tensor_name(name)
        if new is None:
            continue
        arr = np.asarray(arr, dtype=np.float32)
        if f16 and arr.ndim >= 2 and new.endswith(".weight") and new not in _ALWAYS_F32:
            arr = arr.astype(np.float16)
        yield new, arr


def _token_content(entry: Any) -> str | None:
    if isinstance(entry, dict):
        entry = entry.get("content")
    return entry if isinstance(entry, str) else None


class _Vocab:
    """The WordPiece vocab and special-token settings, as llama.cpp's converter derives them."""

    def __init__(self, src: Path, vocab_size: int | None) -> None:
        tok = _load_json(src / "tokenizer.json")
        cfg = _load_json(src / "tokenizer_config.json")
        added = tok.get("added_tokens", [])
        if tok:
            if tok["model"]["type"] != "WordPiece":
                raise ValueError(f"tokenizer model {tok['model']['type']!r} is not WordPiece")
            ids: dict[str, int] = dict(tok["model"]["vocab"])
        else:
            lines = (src / "vocab.txt").read_text(encoding="utf-8").splitlines()
            ids = {t: i for i, t in enumerate(lines)}
        ids.update({a["content"]: a["id"] for a in added})
        n = vocab_size or max(ids.values()) + 1
        if max(ids.values()) >= n:
            raise ValueError(f"token id {max(ids.values())} outside the vocab size {n}")

        # special token strings: tokenizer_config, BOS/EOS falling back to CLS/SEP
        self.special: dict[str, str] = {}
        for typ in ("bos", "eos", "unk", "sep", "pad", "cls", "mask"):
            if (s := _token_content(cfg.get(f"{typ}_token"))) is not None:
                self.special[typ] = s
        for typ, alt in (("bos", "cls"), ("eos", "sep")):
            if tok and alt in self.special:
                self.special.setdefault(typ, self.special[alt])
        control = {a["content"] for a in added if a.get("special")}
        user = {a["content"] for a in added} - control
        if not tok:  # vocab.txt only: the tokens tokenizer_config names are the control ones
            control = set(self.special.values())

        self.tokens = [f"[PAD{i}]" for i in range(n)]
        self.types = [_UNUSED] * n
        for text, i in ids.items():
            kind = _CONTROL if text in control else _USER_DEFINED if text in user else _NORMAL
            self.tokens[i] = _phantom(text, kind)
            self.types[i] = kind

        # ids: looked up among the added tokens (as gguf.SpecialVocab), else the vocab
        added_ids = {a["content"]: a["id"] for a in added}
        self.ids = {
            typ: added_ids.get(s, ids.get(s)) for typ, s in self.special.items() if s in ids
        }
        self.add_flags = self._add_flags(tok.get("post_processor") or {}, cfg)
        norm = tok.get("normalizer") or {}
        self.lowercase: bool | None = None if tok else cfg.get("do_lower_case")
        self.strip_accents: bool | None = None
        if norm.get("type") == "BertNormalizer":
            self.lowercase = norm.get("lowercase")
            self.strip_accents = norm.get("strip_accents")

    def _add_flags(self, post: dict[str, Any], cfg: dict[str, Any]) -> dict[str, bool]:
        """add_bos / add_eos / add_sep as gguf.SpecialVocab reads them off the post-processor."""
        flags: dict[str, bool] = {}
        first_last = (self.special.get("bos"), self.special.get("cls"))
        for proc in post.get("processors", [post]):
            if proc.get("type") == "RobertaProcessing":
                flags.update(bos=True, eos=True, sep=True)
            elif proc.get("type") == "TemplateProcessing":
                single = [next(iter(p.values()))["id"] for p in proc.get("single", [])]
                kinds = [next(iter(p)) for p in proc.get("single", [])]
                trailing = len(single) > 1 and kinds[-1] == "SpecialToken"
                if len(single) > 1 and kinds[0] == "SpecialToken":
                    flags["bos"] = single[0] in first_last
                if trailing:
                    flags["eos"] = single[-1] == self.special.get("eos")
                pair = proc.get("pair", [])
                seq = [i for i, p in enumerate(pair) if "Sequence" in p]
                if len(seq) == 2:
                    middle = [
                        p.get("SpecialToken", {}).get("id") for p in pair[seq[0] + 1 : seq[1]]
                    ]
                    seps = (self.special.get("sep"), self.special.get("eos"))
                    flags["sep"] = len(middle) == 2 or (len(middle) == 1 and not trailing)
                    flags["sep"] = flags["sep"] and all(m in seps for m in middle)
        for typ in ("bos", "eos", "sep"):
            if isinstance(v := cfg.get(f"add_{typ}_token"), bool):
                flags.setdefault(typ, v)
        return flags


def _phantom(text: str, kind: int) -> str:
    if kind == _CONTROL:
        return text
    return text[2:] if text.startswith("##") else "\u2581" + text


def _pooling(src: Path) -> int | None:
    """llama.cpp pooling type of the sentence-transformers Pooling module, if there is one."""
    path = src / "modules.json"
    modules = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    for mod in modules:
        if mod["type"].endswith("Pooling"):
            cfg = _load_json(src / mod["path"] / "config.json")
            if cfg.get("pooling_mode_mean_tokens"):
                return 1  # MEAN
            if cfg.get("pooling_mode_cls_token"):
                return 2  # CLS
            if cfg.get("pooling_mode_lasttoken"):
                return 3  # LAST
            modes = {"mean": 1, "cls": 2, "lasttoken": 3}
            if cfg.get("pooling_mode") in modes:
                return modes[cfg["pooling_mode"]]
            raise NotImplementedError(f"pooling {cfg} not supported: only mean, cls, last")
    return None


def _license(src: Path) -> str | None:
    readme = src / "README.md"
    if readme.is_file():
        m = re.search(r"\A---\n.*?^license:\s*(\S+)", readme.read_text("utf-8"), re.S | re.M)
        if m:
            return m.group(1)
    return None


def convert(
    src: str | Path, out_path: str | Path, *, name: str | None = None, f16: bool = True
) -> Path:
    """Write ``out_path``, a llama.cpp GGUF (arch ``bert``) of the model in directory ``src``.

    ``src`` holds a Hugging Face BERT model: ``config.json``, ``model.safetensors``,
    ``tokenizer.json`` (or ``vocab.txt`` + ``tokenizer_config.json``) and, for a
    sentence-transformers model, ``modules.json`` with its ``Pooling`` config.
    ``f16=False`` stores every tensor as F32.
    """
    gguf = _gguf()
    src, out_path = Path(src), Path(out_path)
    hp = _load_json(src / "config.json")
    if hp.get("model_type") != "bert" and "BertModel" not in hp.get("architectures", []):
        raise ValueError(f"{src / 'config.json'}: not a BERT model")
    if hp.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"position_embedding_type {hp['position_embedding_type']!r} unsupported")
    vocab = _Vocab(src, hp.get("vocab_size"))

    w = gguf.GGUFWriter(out_path, "bert")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name or src.name)
    if lic := _license(src):
        w.add_license(lic)
    w.add_block_count(hp["num_hidden_layers"])
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    w.add_layer_norm_eps(hp.get("layer_norm_eps", 1e-12))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    w.add_causal_attention(False)
    if (pooling := _pooling(src)) is not None:
        w.add_pooling_type(gguf.PoolingType(pooling))

    w.add_token_type_count(hp.get("type_vocab_size", 1))
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre(TOKENIZER_PRE)
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.types)
    # Tokenizer keys are written by name: gguf 0.19, the release on the package index,
    # has no add_cls_token_id / add_mask_token_id / add_normalizer_* yet.
    ids = dict(vocab.ids)
    for typ in _SPECIAL_KEYS:  # config.json's <typ>_token_id fills the gaps
        if typ not in ids and isinstance(tid := hp.get(f"{typ}_token_id"), int):
            ids[typ] = tid
    for typ in _SPECIAL_KEYS:
        if typ in ids:
            w.add_uint32(f"tokenizer.ggml.{_SPECIAL_KEYS[typ]}", ids[typ])
    for typ, flag in vocab.add_flags.items():
        w.add_bool(f"tokenizer.ggml.add_{typ}_token", flag)
    if vocab.lowercase is not None:
        w.add_bool("tokenizer.ggml.normalizer.lowercase", bool(vocab.lowercase))
    if vocab.strip_accents is not None:
        w.add_bool("tokenizer.ggml.normalizer.strip_accents", bool(vocab.strip_accents))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    for tname, arr in _tensors(src / "model.safetensors", f16):
        w.add_tensor(tname, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out_path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m pyllama.convert_bert MODEL_DIR OUT.gguf", file=sys.stderr)
        return 2
    try:
        print(convert(args[0], args[1]))
    except MissingExtraError as e:
        print(f"pyllama.convert_bert: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
