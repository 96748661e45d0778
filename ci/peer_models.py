#!/usr/bin/env python3
"""The hub models of llama.cpp's server test suite, for ci/peer_tests.sh's stand-in hub.

llama.cpp's tools/server/tests download small models from the hub by name. This script
makes a local file for each (written with the ``gguf`` package into a cache folder, each
only when missing) and prints the ``tests/helpers/fake_hub.py`` arguments that serve them
under the suite's names, so that llama-server and pyllama-server really download them.

What stands for what (``REPO`` ``FILE``: the local file):

* ``ggml-org/models`` ``tinyllamas/stories260K.gguf``, ``ggml-org/test-model-stories260K``
  ``stories260K-f32.gguf``: the real stories260K (``--stories``, sha256 checked against
  ``--sha256``); ``ggml-org/stories15M_MOE`` ``stories15M_MOE-F16.gguf`` (LoRA target and
  speculative target), ``ggml-org/tiny-llamas`` ``stories15M-q4_0.gguf`` (draft) and
  ``ggml-org/test-model-router-download`` ``...-F16.gguf``: stories260K again;
* ``ggml-org/models`` ``tinyllamas/split/stories15M-q8_0-0000{1,2,3}-of-00003.gguf``:
  stories260K split in three shards (16 tensors each);
* ``ggml-org/test-model-stories260K-infill``: stories260K with the FIM token ids
  (``tokenizer.ggml.fim_{pre,suf,mid}_token_id``) the /infill endpoint asks for: byte
  tokens that never occur in text (``FIM_TOKENS``);
* ``ggml-org/models`` ``bert-bge-small/ggml-model-f16.gguf``: a random BERT (2 layers,
  n_embd 64, CLS pooling) with bge-small's real tokenizer, copied from
  ``vendor/llama.cpp/models/ggml-vocab-bert-bge.gguf``;
* ``ggml-org/models`` ``jina-reranker-v1-tiny-en/ggml-model-f16.gguf``: the same BERT shape
  with a random classification head and rank pooling (its scores mean nothing);
* ``ggml-org/tinygemma3-GGUF``: ``tinygemma3-Q8_0.gguf``, a random "gemma3" text model
  (2 layers, n_embd 64, Q8_0 matrices, llama's SentencePiece vocabulary from
  ``ggml-vocab-llama-spm.gguf``) and ``mmproj-tinygemma3.gguf``, a random gemma3 (SigLIP)
  projector (tests/fixtures/tiny_vlm.py), so ``-hf ggml-org/tinygemma3-GGUF:Q8_0`` picks
  both; and ``test/11_truck.png``, ``test/91_cat.png``: small random PNGs;
* ``ggml-org/stories15M_MOE`` ``moe_shakespeare15M.gguf``: a random LoRA adapter for
  stories260K's shapes (tests/helpers/lora_adapter.py);
* ``ggml-org/test-preset-ci`` ``preset.ini`` (a plain git file): the presets
  unit/test_router.py::test_router_remote_preset looks for, ``tinygemma3-preset`` and
  ``stories260K-test``, both on ``ggml-org/test-model-stories260K``.

Random weights answer, but not what the suite's regexes expect from the originals (CIFAR
classes, LoRA styles, rerank order): those tests fail on both servers.

usage: ci/peer_models.py --cache DIR --stories FILE --sha256 HEX > ARGS
       ci/peer_models.py rewrite-urls SUITE_DIR HUB_URL
The first prints the fake hub's arguments one a line (``--serve`` / ``--serve-small``,
then ``ORG/REPO=FILE=LOCAL_PATH``). The second rewrites, in every ``*.py`` under
SUITE_DIR, the hub's ``https://HOST/ORG/REPO/resolve/...`` URLs (``download_file()``'s
LoRA and draft, the test images) into ``HUB_URL/ORG/REPO/resolve/...``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.tiny_vlm import (  # noqa: E402
    F16,
    F32,
    _Tensors,
    _write,
    add_tokenizer,
    tokenizer,
    write_vision_projector,
)
from fixtures.tiny_vlm import N_EMBD as VISION_N_EMBD  # noqa: E402
from helpers.lora_adapter import write_lora  # noqa: E402
from helpers.media import png  # noqa: E402

# bump when a recipe below changes: the files live in a folder per version
VERSION = "1"
VOCABS = ROOT / "vendor" / "llama.cpp" / "models"
FIM_TOKENS = {"fim_pre": 3, "fim_suf": 4, "fim_mid": 5}  # stories260K's <0x00> <0x01> <0x02>

# random BERT (bge-small and the reranker)
B_EMBD, B_LAYER, B_HEAD, B_FF, B_CTX = 64, 2, 4, 128, 512
# random gemma3 text model; its n_embd is the projector's projection_dim
G_EMBD, G_LAYER, G_HEAD, G_HEAD_KV, G_FF, G_CTX = VISION_N_EMBD, 2, 4, 2, 128, 4096

PRESET_INI = """\
[tinygemma3-preset]
hf-repo = ggml-org/test-model-stories260K

[stories260K-test]
hf-repo = ggml-org/test-model-stories260K
"""


def _made(path: Path, write: Callable[[Path], object]) -> Path:
    """``path``, written by ``write(path)`` when missing."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    return path


def _copy_fields(w: gguf.GGUFWriter, reader: gguf.GGUFReader) -> None:
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def _copy_tensors(w: gguf.GGUFWriter, reader: gguf.GGUFReader) -> None:
    for t in reader.tensors:
        shape = list(reversed(t.shape.tolist()))
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type, raw_shape=shape)


def _derived(src: Path, out: Path, extra: Callable[[gguf.GGUFWriter], None]) -> Path:
    """A copy of ``src`` with ``extra`` keys added."""
    reader = gguf.GGUFReader(str(src))
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())

    def fill(w: gguf.GGUFWriter) -> None:
        _copy_fields(w, reader)
        extra(w)
        _copy_tensors(w, reader)

    return _write(out, arch, fill)


def write_infill(stories: Path, out: Path) -> Path:
    def extra(w: gguf.GGUFWriter) -> None:
        for kind, tok in FIM_TOKENS.items():
            w.add_uint32(f"tokenizer.ggml.{kind}_token_id", tok)

    return _derived(stories, out, extra)


def write_split(stories: Path, folder: Path, stem: str, shards: int = 3) -> list[Path]:
    """stories260K in ``shards`` GGUF shards ``<stem>-0000i-of-0000n.gguf`` in ``folder``
    (written into a scratch folder, then moved in one rename)."""
    names = [f"{stem}-{i:05d}-of-{shards:05d}.gguf" for i in range(1, shards + 1)]
    if all((folder / n).is_file() for n in names):
        return [folder / n for n in names]
    reader = gguf.GGUFReader(str(stories))
    per_shard = -(-len(reader.tensors) // shards)
    tmp = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}")
    tmp.mkdir(parents=True)
    try:
        w = gguf.GGUFWriter(
            str(tmp / f"{stem}.gguf"),
            str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents()),
            split_max_tensors=per_shard,
        )
        _copy_fields(w, reader)
        _copy_tensors(w, reader)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        missing = [n for n in names if not (tmp / n).is_file()]
        if missing:
            raise RuntimeError(f"gguf wrote other shards than {missing}")
        if not all((folder / n).is_file() for n in names):  # else another run made them
            shutil.rmtree(folder, ignore_errors=True)  # a partial folder
            os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [folder / n for n in names]


def write_bert(out: Path, *, rerank: bool, seed: int) -> Path:
    """A random BERT with bge-small's tokenizer: an embedding model (CLS pooling), or with
    ``rerank`` a reranker (a classification head ``cls``/``cls.output``, rank pooling)."""
    fields, n_vocab = tokenizer(VOCABS / "ggml-vocab-bert-bge.gguf")

    def fill(w: gguf.GGUFWriter) -> None:
        w.add_type(gguf.GGUFType.MODEL)
        w.add_name("random bert reranker" if rerank else "random bert (bge-small tokenizer)")
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        w.add_context_length(B_CTX)
        w.add_embedding_length(B_EMBD)
        w.add_block_count(B_LAYER)
        w.add_feed_forward_length(B_FF)
        w.add_head_count(B_HEAD)
        w.add_layer_norm_eps(1e-12)
        w.add_causal_attention(False)
        w.add_pooling_type(gguf.PoolingType.RANK if rerank else gguf.PoolingType.CLS)
        add_tokenizer(w, fields)  # token_type_count 2 among them

        t = _Tensors(w, seed)
        t.normal("token_embd.weight", (n_vocab, B_EMBD), 1.0, F16)
        t.normal("token_types.weight", (2, B_EMBD), 0.1)
        t.normal("position_embd.weight", (B_CTX, B_EMBD), 0.1)
        t.layer_norm("token_embd_norm", B_EMBD)
        for i in range(B_LAYER):
            p = f"blk.{i}"
            for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
                t.linear(f"{p}.{name}", B_EMBD, B_EMBD)
            t.layer_norm(f"{p}.attn_output_norm", B_EMBD)
            t.linear(f"{p}.ffn_up", B_EMBD, B_FF)
            t.linear(f"{p}.ffn_down", B_FF, B_EMBD)
            t.layer_norm(f"{p}.layer_output_norm", B_EMBD)
        if rerank:
            t.linear("cls", B_EMBD, B_EMBD)
            t.linear("cls.output", B_EMBD, 1)

    return _write(out, "bert", fill)


def write_gemma3(out: Path, *, seed: int = 0) -> Path:
    """A random "gemma3" text model, no sliding window, Q8_0 matrices (F32 norms)."""
    fields, n_vocab = tokenizer(VOCABS / "ggml-vocab-llama-spm.gguf")
    head = G_EMBD // G_HEAD
    q8 = gguf.GGMLQuantizationType.Q8_0
    rng = np.random.default_rng(seed)

    def fill(w: gguf.GGUFWriter) -> None:
        w.add_type(gguf.GGUFType.MODEL)
        w.add_name("tinygemma3 stand-in (random weights)")
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
        w.add_context_length(G_CTX)
        w.add_embedding_length(G_EMBD)
        w.add_block_count(G_LAYER)
        w.add_feed_forward_length(G_FF)
        w.add_head_count(G_HEAD)
        w.add_head_count_kv(G_HEAD_KV)
        w.add_key_length(head)
        w.add_value_length(head)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_rope_freq_base(10000.0)
        w.add_vocab_size(n_vocab)
        add_tokenizer(w, fields)

        def matrix(name: str, n_in: int, n_out: int, gain: float = 1.0) -> None:
            data = (rng.standard_normal((n_out, n_in)) * gain / np.sqrt(n_in)).astype(F32)
            w.add_tensor(name, gguf.quants.quantize(data, q8), raw_dtype=q8)

        def ones(name: str, n: int) -> None:
            w.add_tensor(name, np.ones(n, dtype=F32))

        # the embedding is scaled by sqrt(n_embd) in the graph; tied output matrix
        matrix("token_embd.weight", G_EMBD, n_vocab, gain=np.sqrt(G_EMBD) / 8)
        ones("output_norm.weight", G_EMBD)
        kv = G_HEAD_KV * head
        for i in range(G_LAYER):
            p = f"blk.{i}"
            ones(f"{p}.attn_norm.weight", G_EMBD)
            matrix(f"{p}.attn_q.weight", G_EMBD, G_EMBD)
            matrix(f"{p}.attn_k.weight", G_EMBD, kv)
            matrix(f"{p}.attn_v.weight", G_EMBD, kv)
            matrix(f"{p}.attn_output.weight", G_EMBD, G_EMBD)
            ones(f"{p}.attn_q_norm.weight", head)
            ones(f"{p}.attn_k_norm.weight", head)
            ones(f"{p}.post_attention_norm.weight", G_EMBD)
            ones(f"{p}.ffn_norm.weight", G_EMBD)
            matrix(f"{p}.ffn_gate.weight", G_EMBD, G_FF)
            matrix(f"{p}.ffn_up.weight", G_EMBD, G_FF)
            matrix(f"{p}.ffn_down.weight", G_FF, G_EMBD)
            ones(f"{p}.post_ffw_norm.weight", G_EMBD)

    return _write(out, "gemma3", fill)


def _write_bytes(out: Path, data: bytes) -> None:
    part = out.with_name(f".{out.name}.{uuid.uuid4().hex}.part")
    part.write_bytes(data)
    os.replace(part, out)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build(cache: Path, stories: Path) -> list[tuple[str, str, Path, bool]]:
    """Make the files that are missing; (repo, file name, local path, lfs) for each."""
    d = cache / f"v{VERSION}"
    infill = _made(d / "stories260K-infill.gguf", lambda p: write_infill(stories, p))
    split = write_split(stories, d / "split", "stories15M-q8_0")
    bert = _made(d / "bert-random.gguf", lambda p: write_bert(p, rerank=False, seed=0))
    rerank = _made(d / "bert-rerank-random.gguf", lambda p: write_bert(p, rerank=True, seed=1))
    gemma = _made(d / "tinygemma3-Q8_0.gguf", write_gemma3)
    mmproj = _made(d / "mmproj-tinygemma3.gguf", lambda p: write_vision_projector(p, seed=1))
    lora = _made(d / "lora-stories260K.gguf", lambda p: write_lora(stories, p, seed=0))
    truck = _made(d / "11_truck.png", lambda p: _write_bytes(p, png(96, 64, seed=11)))
    cat = _made(d / "91_cat.png", lambda p: _write_bytes(p, png(64, 64, seed=91)))
    preset = _made(d / "preset.ini", lambda p: _write_bytes(p, PRESET_INI.encode()))

    files = [
        ("ggml-org/models", "tinyllamas/stories260K.gguf", stories, True),
        *[("ggml-org/models", f"tinyllamas/split/{s.name}", s, True) for s in split],
        ("ggml-org/models", "bert-bge-small/ggml-model-f16.gguf", bert, True),
        ("ggml-org/models", "jina-reranker-v1-tiny-en/ggml-model-f16.gguf", rerank, True),
        ("ggml-org/test-model-stories260K", "stories260K-f32.gguf", stories, True),
        ("ggml-org/test-model-stories260K-infill", "stories260K-infill-f32.gguf", infill, True),
        ("ggml-org/tinygemma3-GGUF", "tinygemma3-Q8_0.gguf", gemma, True),
        ("ggml-org/tinygemma3-GGUF", "mmproj-tinygemma3.gguf", mmproj, True),
        ("ggml-org/tinygemma3-GGUF", "test/11_truck.png", truck, True),
        ("ggml-org/tinygemma3-GGUF", "test/91_cat.png", cat, True),
        ("ggml-org/stories15M_MOE", "stories15M_MOE-F16.gguf", stories, True),
        ("ggml-org/stories15M_MOE", "moe_shakespeare15M.gguf", lora, True),
        ("ggml-org/tiny-llamas", "stories15M-q4_0.gguf", stories, True),
        (
            "ggml-org/test-model-router-download",
            "test-model-router-download-F16.gguf",
            stories,
            True,
        ),
        ("ggml-org/test-preset-ci", "preset.ini", preset, False),
    ]
    return files


# https://HOST/ORG/REPO/resolve/...: the hub's file URLs, whatever its host
_HUB_FILE_URL = re.compile(r"https://[^/\s\"']+/(?=[\w.-]+/[\w.-]+/resolve/)")


def rewrite_urls(suite: Path, hub_url: str) -> int:
    """Point the hub file URLs in ``suite``'s ``*.py`` at ``hub_url``; how many changed."""
    count = 0
    for path in sorted(suite.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        new, n = _HUB_FILE_URL.subn(hub_url.rstrip("/") + "/", text)
        if n:
            path.write_text(new, encoding="utf-8")
            count += n
    return count


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["rewrite-urls"]:
        if len(argv) != 3:
            sys.exit("usage: peer_models.py rewrite-urls SUITE_DIR HUB_URL")
        n = rewrite_urls(Path(argv[1]), argv[2])
        print(f"{n} hub URLs now on {argv[2]}", file=sys.stderr)
        return 0 if n else 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", required=True, type=Path, help="folder for the written models")
    ap.add_argument("--stories", required=True, type=Path, help="the real stories260K.gguf")
    ap.add_argument("--sha256", required=True, help="stories260K.gguf's sha256")
    args = ap.parse_args(argv)
    if not args.stories.is_file():
        print(f"peer_models.py: {args.stories} not found", file=sys.stderr)
        return 2
    digest = _sha256(args.stories)
    if digest != args.sha256.lower():
        print(
            f"peer_models.py: {args.stories}: sha256 {digest}, expected {args.sha256}",
            file=sys.stderr,
        )
        return 2
    for repo, name, path, lfs in build(args.cache, args.stories.resolve()):
        print("--serve" if lfs else "--serve-small")
        print(f"{repo}={name}={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
