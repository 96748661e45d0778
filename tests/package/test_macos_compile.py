"""The macOS arm64 build's C and C++, compiled here for aarch64-macos by zig's clang.

No macOS machine runs in CI, and the macOS job of the release workflow runs on a hosted
runner only when a version is tagged. ci/check_macos.sh compiles what that job builds from
C and C++ with the PyPI package ziglang (Apple's libc headers and libSystem.tbd): _core's
every source, ggml-base, libggml, Apple's three CPU variants, ggml-rpc, ggml-metal's C++
files and its embedded shader library (assembled, its symbols checked). It links nothing and
runs nothing: docs/distribution.md says what that leaves unproven. About 6 CPU-minutes
cold; zig keeps the objects in its cache (~/.cache/zig), so a rerun takes seconds.

It needs ziglang and pybind11 in this Python. Missing, this test skips and says so;
``PYLLAMA_REQUIRE_MACOS_CHECK=1`` (CI, which installs them) makes that an error.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci" / "check_macos.sh"


def _missing() -> str:
    zig = subprocess.run(
        [sys.executable, "-m", "ziglang", "version"], capture_output=True, text=True
    )
    if zig.returncode != 0:
        return "zig missing: pip install ziglang (CI installs it; ci/check_macos.sh pins it)"
    if importlib.util.find_spec("pybind11") is None:
        return "pybind11 missing: pip install pybind11 (the bindings' headers; CI installs it)"
    return ""


MISSING = _missing()
if MISSING and os.environ.get("PYLLAMA_REQUIRE_MACOS_CHECK") == "1":
    raise RuntimeError(f"PYLLAMA_REQUIRE_MACOS_CHECK=1: {MISSING}")
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING or "")


def test_the_macos_arm64_sources_compile():
    proc = subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=1500,
        env={**os.environ, "PYTHON": sys.executable},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    summary = re.search(r"^macOS compile check: (\d+) files compiled, (\d+) failed$", out, re.M)
    assert summary and summary[2] == "0", out[-6000:]
    # every source of _core, and ggml beside it
    sources = [
        *ROOT.glob("csrc/*.cpp"),
        *ROOT.glob("csrc/core/*.cpp"),
        *ROOT.glob("csrc/engine/*.cpp"),
    ]
    assert int(summary[1]) > len(sources) + 50, out[-6000:]
    embedded = re.search(r"(\d+) Metal kernel sources embedded", out)
    assert embedded and int(embedded[1]) > 0, out[-6000:]
