"""all-MiniLM-L6-v2 converted to GGUF (pyllama.convert_bert) against a numpy forward pass
of the very same safetensors weights, and its tokenizer against WordPiece references."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pyllama import Llama, _core
from pyllama.convert_bert import convert, read_safetensors
from pyllama.engine import generate, make_task, open_engine
from pyllama.models import EMBEDDING_MODEL, embedding_model, fetch_files

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "Hello, world!",
    "Transformers compute contextual token representations; mean pooling averages them.",
    "naïve café owners don't like unaffable customers",
]


@pytest.fixture(scope="module")
def minilm(minilm_path: str) -> _core.Model:
    return _core.Model(minilm_path)


@pytest.fixture(scope="module")
def source() -> Path:
    """The safetensors, configs and vocab the GGUF was made from (cached with it)."""
    return fetch_files(EMBEDDING_MODEL)


@pytest.fixture(scope="module")
def vocab(source: Path) -> list[str]:
    return (source / "vocab.txt").read_text(encoding="utf-8").splitlines()


# ------------------------------------------------------------------ numpy reference
_erf = np.frompyfunc(math.erf, 1, 1)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def reference_embedding(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """BERT forward pass (erf GELU), mean pooling over all tokens, L2 normalised."""
    n, n_head = len(ids), 12

    # einsum, not @: no BLAS thread pool to fight llama.cpp's threads on a small machine
    def lin(x: np.ndarray, name: str) -> np.ndarray:
        return np.einsum("ni,oi->no", x, w[f"{name}.weight"]) + w[f"{name}.bias"]

    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    for i in range(6):
        p = f"encoder.layer.{i}."
        q, k, v = (
            lin(x, p + f"attention.self.{t}").reshape(n, n_head, -1).transpose(1, 0, 2)
            for t in ("query", "key", "value")
        )
        scores = np.einsum("hqd,hkd->hqk", q, k) / math.sqrt(q.shape[-1])
        att = np.exp(scores - scores.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = np.einsum("hqk,hkd->qhd", att, v).reshape(n, -1)
        x = _layer_norm(
            x + lin(ctx, p + "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        h = lin(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)).astype(np.float64))
        x = _layer_norm(
            x + lin(h, p + "output.dense"),
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
        )
    e = x.mean(0)
    return e / np.linalg.norm(e)


@pytest.fixture(scope="module")
def reference(source: Path, minilm: _core.Model) -> list[np.ndarray]:
    weights = {
        k: v.astype(np.float64)
        for k, v in read_safetensors(source / "model.safetensors").items()
        if v.dtype.kind == "f"
    }
    return [reference_embedding(weights, minilm.tokenize(s, True, True)) for s in SENTENCES]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ------------------------------------------------------------------ the GGUF itself
def test_gguf_metadata(minilm: _core.Model, minilm_path: str):
    assert minilm.meta("general.architecture") == "bert"
    assert minilm.meta("bert.pooling_type") == "1"  # mean, from 1_Pooling/config.json
    assert minilm.meta("bert.attention.causal") == "false"
    assert minilm.is_encoder  # the engine's 32 slots and step cap key on it
    assert minilm.meta("tokenizer.ggml.model") == "bert"
    assert minilm.n_embd == 384
    assert minilm.n_vocab == 30522
    ctx = _core.Context(minilm, embeddings=True, n_ctx=512, n_threads=2)
    assert ctx.pooling == 1  # llama.cpp takes the pooling type from the file
    assert Path(minilm_path).stat().st_size < 60_000_000  # F16 matrices


def test_convert_is_deterministic(source: Path, minilm_path: str, tmp_path: Path):
    out = convert(source, tmp_path / "again.gguf", name=EMBEDDING_MODEL.name)
    assert out.read_bytes() == Path(minilm_path).read_bytes()
    assert embedding_model(offline=True) == minilm_path  # cached: no fetch, no conversion


def test_convert_rejects_other_models(tmp_path: Path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a BERT model"):
        convert(tmp_path, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


# ------------------------------------------------------------------ tokenizer
def test_tokenize_adds_cls_and_sep(minilm: _core.Model, vocab: list[str]):
    assert minilm.tokenize("hello world", True, True) == [101, 7592, 2088, 102]
    assert minilm.tokenize("hello world", False, False) == [7592, 2088]
    assert vocab[101] == "[CLS]" and vocab[102] == "[SEP]"
    # uncased, accents stripped, punctuation split, greedy longest-match word pieces
    ids = minilm.tokenize("Hello, UNAFFABLE naïve café!", True, True)
    assert [vocab[i] for i in ids] == [
        "[CLS]",
        "hello",
        ",",
        "una",
        "##ffa",
        "##ble",
        "naive",
        "cafe",
        "!",
        "[SEP]",
    ]


def test_tokenizer_reference_vectors(minilm: _core.Model, vendor_models: Path):
    """HF tokenizations of llama.cpp's bert-bge test inputs: same uncased vocab, same rules."""
    bge = _core.Model(str(vendor_models / "ggml-vocab-bert-bge.gguf"), vocab_only=True)
    # only "[unusedN]" differ: today's converter writes them as ordinary words, "▁[unusedN]"
    differ = [i for i in range(minilm.n_vocab) if minilm.token_text(i) != bge.token_text(i)]
    assert all(bge.token_text(i).startswith(b"[unused") for i in differ), differ[:5]

    from helpers.tokenizer_vectors import read_vectors

    vectors = read_vectors(vendor_models / "ggml-vocab-bert-bge.gguf")
    failures = [
        (text, want, got)
        for text, want in vectors
        if (got := minilm.tokenize(text, False, False)) != want
    ]
    assert not failures, f"{len(failures)}/{len(vectors)} mismatches, first: {failures[0]!r}"


# ------------------------------------------------------------------ embeddings
def test_engine_embeddings_match_numpy(minilm: _core.Model, reference: list[np.ndarray]):
    eng = open_engine(minilm, embeddings=True, n_parallel=2, n_ctx=2 * 512, n_threads=2)
    try:
        for text, ref in zip(SENTENCES, reference):
            task = make_task(minilm.tokenize(text, True, True), kind=_core.TaskKind.EMBEDDING)
            final = next(e for e in generate(eng, task) if e.done)
            got = np.array(final.embedding)
            assert got.shape == (384,)
            assert cosine(got, ref) >= 0.9999, text
    finally:
        eng.stop()


def test_llama_embed_matches_numpy(minilm_path: str, reference: list[np.ndarray]):
    with Llama(minilm_path, n_ctx=512, n_threads=2, embedding=True, verbose=False) as llm:
        got = np.array(llm.embed(SENTENCES, normalize=True))
    assert got.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    for text, g, ref in zip(SENTENCES, got, reference):
        assert cosine(g, ref) >= 0.9999, text


def test_semantic_similarity(minilm_path: str):
    with Llama(minilm_path, n_ctx=512, n_threads=2, embedding=True, verbose=False) as llm:
        food, bread, baby = (np.array(v) for v in llm.embed(SENTENCES[:3], normalize=True))
    assert food @ bread > food @ baby
    assert food @ bread > 0.5
