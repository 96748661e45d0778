"""A source build's CPU kernels for the build machine (cmake/host_cpu_variant.cmake): the
portable module plus ggml's variant for the machine where it has more than AVX2, never the
AMX one unless allowed, the machine's own alone below AVX2. Run through ``cmake -P`` with
the CPU flags of real parts, as /proc/cpuinfo names them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pyllama import hardware

ROOT = Path(__file__).resolve().parents[2]
V3 = "fpu sse4_1 sse4_2 avx f16c fma avx2 bmi1 bmi2"
AVX512 = "avx512f avx512cd avx512vl avx512dq avx512bw"
ZEN4 = f"{V3} {AVX512} avx512vbmi avx512_vnni avx512_bf16 avx512_vpopcntdq"
SPR = f"{ZEN4} amx_tile amx_int8 amx_bf16"


def _choice(flags: str, *defs: str) -> str:
    cmake = shutil.which("cmake")
    assert cmake, "cmake is a build requirement"
    out = subprocess.run(
        [cmake, f"-DFLAGS={flags}", *defs, "-P", str(ROOT / "cmake" / "host_cpu_variant.cmake")],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stderr.strip()  # message() prints to stderr


@pytest.mark.parametrize(
    ("flags", "variants"),
    [
        (V3, ""),  # the portable module is the machine's best: one module, as before
        (f"{V3} avx_vnni", "haswell;alderlake"),
        (f"{V3} {AVX512}", "haswell;skylakex"),
        (f"{V3} {AVX512} avx512_vnni", "haswell;cascadelake"),
        (f"{V3} {AVX512} avx512vbmi avx512_vnni", "haswell;icelake"),
        (ZEN4, "haswell;zen4"),
        (SPR, "haswell;zen4"),  # AMX reported: its variant stays out
        ("fpu sse4_2 avx", "sandybridge"),  # no AVX2: the portable module could not run
        ("", ""),
    ],
    ids=["v3", "avx-vnni", "skylake-x", "cascade-lake", "ice-lake", "zen4", "amx", "sandy", "none"],
)
def test_the_build_machines_variant(flags: str, variants: str) -> None:
    assert _choice(flags) == variants


def test_amx_only_when_allowed() -> None:
    assert _choice(SPR, "-DPYLLAMA_AMX=ON") == "haswell;sapphirerapids"


def test_the_installed_build_reports_its_kernels() -> None:
    """pyllama.hardware's line (the server's start-up line) names the kernels in use."""
    features = hardware.cpu_features()
    line = hardware.summary()
    assert "kernels" in line and " ".join(features) in line, line
    assert hardware.cpu_variant() in hardware.cpu_modules()
