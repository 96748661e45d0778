"""Repository checks that run with the tests: the compiled module's stub is current, ruff is clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_stub_is_current(tmp_path):
    """pyllama/_core.pyi must be what pybind11-stubgen generates from the built module."""
    subprocess.run(
        [sys.executable, "-m", "pybind11_stubgen", "pyllama._core", "-o", str(tmp_path)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    generated = (tmp_path / "pyllama" / "_core.pyi").read_text()
    committed = (ROOT / "pyllama" / "_core.pyi").read_text()
    assert generated == committed, (
        "stub is stale: regenerate with "
        "`pybind11-stubgen pyllama._core -o /tmp/stubs && cp /tmp/stubs/pyllama/_core.pyi pyllama/`"
    )


def test_ruff_clean():
    # through this interpreter: the test extras install ruff into it, and a venv that is
    # not activated has no `ruff` on PATH
    res = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
