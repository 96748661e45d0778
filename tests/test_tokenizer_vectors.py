"""llama.cpp's tokenizer test vectors (vendor/llama.cpp/models/*.inp/.out) through our bindings."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyllama import Model

SEP = "\n__ggml_vocab_test__\n"
VOCABS = sorted(
    p.name[: -len(".inp")]
    for p in (Path(__file__).resolve().parent.parent / "vendor" / "llama.cpp" / "models").glob(
        "*.gguf.inp"
    )
)


def read_vectors(base: Path) -> list[tuple[str, list[int]]]:
    # bytes, not text mode: inputs contain \r\n that universal newlines would rewrite
    raw = base.with_name(base.name + ".inp").read_bytes().decode("utf-8")
    inputs = raw.split(SEP)
    if raw.endswith(SEP):  # as llama.cpp's reader: a trailing separator ends the list
        inputs.pop()
    outputs = base.with_name(base.name + ".out").read_text(encoding="utf-8").splitlines()
    assert len(inputs) == len(outputs), f"{base.name}: {len(inputs)} inputs, {len(outputs)} outputs"
    return [(i, [int(t) for t in o.split()]) for i, o in zip(inputs, outputs)]


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
