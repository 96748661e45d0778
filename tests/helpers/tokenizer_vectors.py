"""llama.cpp's tokenizer test vectors (``vendor/llama.cpp/models/*.inp`` and ``.out``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_vectors"]

SEP = "\n__ggml_vocab_test__\n"


def read_vectors(base: Path) -> list[tuple[str, list[int]]]:
    # bytes, not text mode: inputs contain \r\n that universal newlines would rewrite
    raw = base.with_name(base.name + ".inp").read_bytes().decode("utf-8")
    inputs = raw.split(SEP)
    if raw.endswith(SEP):  # as llama.cpp's reader: a trailing separator ends the list
        inputs.pop()
    outputs = base.with_name(base.name + ".out").read_text(encoding="utf-8").splitlines()
    assert len(inputs) == len(outputs), f"{base.name}: {len(inputs)} inputs, {len(outputs)} outputs"
    return [(i, [int(t) for t in o.split()]) for i, o in zip(inputs, outputs)]
