"""llama.cpp's tokenizer test vectors (vendor/llama.cpp/models/*.inp/.out) through our bindings."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyllama import Model

from helpers.tokenizer_vectors import read_vectors

VOCABS = sorted(
    p.name[: -len(".inp")]
    for p in (Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models").glob(
        "*.gguf.inp"
    )
)


def test_vectors_present():
    assert len(VOCABS) >= 10, "vendor/llama.cpp/models should carry tokenizer vectors"


@pytest.mark.parametrize("vocab", VOCABS)
def test_tokenizer_vectors(vendor_models: Path, vocab: str):
    model = Model(str(vendor_models / vocab), vocab_only=True)
    vectors = read_vectors(vendor_models / vocab)
    failures = [
        (text, want, got)
        for text, want in vectors
        if (got := model.tokenize(text, add_special=False, parse_special=False)) != want
    ]
    assert not failures, f"{len(failures)}/{len(vectors)} mismatches, first: {failures[0]!r}"
