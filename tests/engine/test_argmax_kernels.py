"""Every argmax kernel the engine's greedy path can pick gives numpy's answer.

The kernels scan a row once by blocks (csrc/core/logits_scan.cpp) and find the maximum's
first index again inside the last block that raised it; the cases below put the maximum in
the first and last blocks, in the scalar tail, tie it across blocks and lanes, and mix in
NaN (never wins) and -inf (all -inf: -1), at lengths around every block size."""

from __future__ import annotations

import platform

import numpy as np
import pytest

from pyllama import _core

X86 = platform.machine() in ("x86_64", "AMD64")
# the platform's own kernels; the x86 ones above SSE2 are skipped on a CPU without them
KERNELS = ["best", "scalar", *(["sse2", "avx2", "avx512"] if X86 else ["neon"])]
LENGTHS = [1, 3, 4, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300, 1000, 49152]


def expected(row: np.ndarray) -> int:
    clean = np.where(np.isnan(row), -np.inf, row)
    if clean.size == 0 or np.all(clean == -np.inf):
        return -1
    return int(np.argmax(clean))  # numpy: the first of equal maxima


def kernel_or_skip(kernel: str) -> str:
    try:
        _core._argmax(np.zeros(1, np.float32), kernel)
    except ValueError as e:
        pytest.skip(f"argmax kernel {kernel} is not on this CPU or build: {e}")
    return kernel


def rows(n: int, rng: np.random.Generator):
    base = rng.standard_normal(n).astype(np.float32)
    yield base
    for at in {0, n // 2, n - 1}:
        r = base.copy()
        r[at] = 9.0  # a single maximum in the first block, the middle, the tail
        yield r
    r = base.copy()
    r[[n - 1, n // 3, n // 2]] = 9.0  # ties: the first one wins
    yield r
    r = np.full(n, 1.5, np.float32)  # all equal: index 0
    yield r
    yield np.full(n, -np.inf, np.float32)
    r = base.copy()
    r[::3] = np.nan
    yield r
    r = np.full(n, np.nan, np.float32)
    r[n - 1] = -np.inf  # NaN and -inf only: -1
    yield r
    r = np.full(n, -np.inf, np.float32)
    r[n // 2] = -3.0
    yield r
    r = base.copy()
    r[n // 2] = np.inf
    yield r


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_matches_numpy(kernel: str) -> None:
    kernel_or_skip(kernel)
    rng = np.random.default_rng(7)
    for n in LENGTHS:
        for row in rows(n, rng):
            assert _core._argmax(row, kernel) == expected(row), (kernel, n, row[:8])


def test_the_baseline_vector_kernel_is_always_there() -> None:
    # SSE2 is in every x86-64 CPU, NEON in every AArch64 one
    assert _core._argmax(np.arange(5, dtype=np.float32), "sse2" if X86 else "neon") == 4


def test_empty_row_and_unknown_kernel() -> None:
    assert _core._argmax(np.zeros(0, np.float32)) == -1
    with pytest.raises(ValueError, match="unknown"):
        _core._argmax(np.zeros(4, np.float32), "mmx")
