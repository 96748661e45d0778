"""The Linux ARM CPU variant choice, run as qemu-aarch64 CPU models.

The aarch64 wheel carries ggml's ARM CPU variants and loads the best one at import, as the
x86-64 wheel does (csrc/core/backends.cpp). Cross-building the whole wheel takes ~25
minutes on 2 cores and running it under qemu minutes per CPU model, so that proof is the
release script's (ci/build_wheel_aarch64.sh, ci/cpu_variants_aarch64.sh). This checks
its part that fits CI: the same ARM CPU modules, built as in the wheel, and pyllama's loader
code in a small program (ci/arm_probe/, ~3 CPU-minutes cold: ci/build_arm_probe.sh). For
each CPU model pyllama must pick the variant the model's features allow, ggml's own loader
(llama.cpp's tools) the same one, and that variant's matrix-product kernels must run (qemu
raises SIGILL on an instruction the model lacks) and agree with a float product; under the
"max" model, forced with ``PYLLAMA_CPU_VARIANT``, every variant built does the same.

The probe's folder comes from ``PYLLAMA_ARM_PROBE`` (default: the cache's ``arm-probe/bin``).
Missing, these tests skip and say so; ``PYLLAMA_REQUIRE_ARM_PROBE=1`` (CI, which builds it)
makes that an error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PROBE_DIR = Path(
    os.environ.get("PYLLAMA_ARM_PROBE")
    or Path(os.environ.get("PYLLAMA_CACHE", Path.home() / ".cache/pyllama")) / "arm-probe/bin"
)
# the cross compiler's C and C++ runtime for aarch64: what qemu-aarch64 -L runs the probe with
CROSS_ROOT = Path("/usr/aarch64-linux-gnu")


def _missing() -> str:
    if not (PROBE_DIR / "arm_probe").is_file():
        return f"arm_probe not built in {PROBE_DIR}: run ci/build_arm_probe.sh (CI builds it)"
    if shutil.which("qemu-aarch64") is None:
        return "qemu-aarch64 missing (apt-get install qemu-user)"
    return ""


MISSING = _missing()
if MISSING and os.environ.get("PYLLAMA_REQUIRE_ARM_PROBE") == "1":
    raise RuntimeError(f"PYLLAMA_REQUIRE_ARM_PROBE=1: {MISSING}")
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING or "")

# Each qemu CPU model (Debian 12's qemu 7.2) and the variant its features allow
# (ggml-cpu/arch/arm/cpu-feats.cpp: a variant needs every feature it was built with).
SME_BUILT = (PROBE_DIR / "libggml-cpu-armv9.2_2.so").is_file()  # GCC >= 14 only
CASES = [
    ("cortex-a53", "armv8.0_1"),  # Armv8.0: no dotprod
    ("neoverse-n1", "armv8.2_2"),  # dotprod and fp16
    ("a64fx", "armv8.0_1"),  # SVE and fp16 without dotprod, which every SVE variant needs
    ("max,sve=off", "armv8.2_2"),  # i8mm without SVE: armv8.6_1 also needs SVE
    ("max", "armv9.2_2" if SME_BUILT else "armv8.6_2"),  # SVE2, i8mm, SME
]


def run_probe(cpu: str, mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    """arm_probe MODE (pyllama or ggml) as qemu CPU model ``cpu``."""
    command = ["qemu-aarch64", "-cpu", cpu, "-L", str(CROSS_ROOT), str(PROBE_DIR / "arm_probe")]
    return subprocess.run(
        [*command, mode, str(PROBE_DIR)],
        capture_output=True,
        text=True,
        timeout=120,
        # the suite's own PYLLAMA_CPU_VARIANT (tests/conftest.py) names an x86 module
        env={**{k: v for k, v in os.environ.items() if k != "PYLLAMA_CPU_VARIANT"}, **env},
    )


def probe(cpu: str, mode: str, **env: str) -> tuple[str, dict[str, float]]:
    """The variant loaded, and each matrix product's error relative to the float one."""
    proc = run_probe(cpu, mode, **env)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout}{proc.stderr[-2000:]}"
    variant = ""
    errors = {}
    for line in proc.stdout.splitlines():
        key, _, rest = line.partition(" ")
        if key == "variant":
            variant = rest
        elif key == "matmul":
            type_name, err = rest.split()
            errors[type_name] = float(err)
    return variant, errors


@pytest.mark.parametrize(("cpu", "want"), CASES, ids=[c for c, _ in CASES])
def test_variant_for_cpu_model(cpu: str, want: str) -> None:
    ours, errors = probe(cpu, "pyllama")
    assert ours == want
    assert probe(cpu, "ggml")[0] == want  # ggml's own loader agrees
    assert set(errors) == {"q4_0", "q4_1", "q8_0"}
    assert all(e < 0.02 for e in errors.values()), errors


# every CPU module built; "max" can run them all, and the override runs those no model picks
BUILT = sorted(p.name[len("libggml-cpu-") : -3] for p in PROBE_DIR.glob("libggml-cpu-*.so"))


@pytest.mark.parametrize("variant", BUILT)
def test_override_runs_each_variant(variant: str) -> None:
    ours, errors = probe("max", "pyllama", PYLLAMA_CPU_VARIANT=variant)
    assert ours == variant
    assert all(e < 0.02 for e in errors.values()), errors


def test_every_variant_of_the_list_is_built() -> None:
    # ggml's Linux ARM list (ggml/src/CMakeLists.txt), less the SME pair GCC < 14 cannot build
    want = {"armv8.0_1", "armv8.2_1", "armv8.2_2", "armv8.2_3", "armv8.6_1", "armv8.6_2"}
    assert want <= set(BUILT)


def test_override_refuses_a_variant_the_cpu_lacks() -> None:
    proc = run_probe("cortex-a53", "pyllama", PYLLAMA_CPU_VARIANT="armv8.2_2")
    assert proc.returncode == 2
    assert "PYLLAMA_CPU_VARIANT=armv8.2_2: this CPU lacks the instructions" in proc.stdout
