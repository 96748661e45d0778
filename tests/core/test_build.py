"""The default build is the portable one and runs here."""

from __future__ import annotations

import platform

import pytest

import pyllama


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 build flags"
)
def test_default_x86_build_is_portable():
    info = pyllama.system_info()
    assert "AVX2 = 1" in info and "FMA = 1" in info, info
    # AMX kernels crash on hosts that report AMX without granting it: opt-in only
    assert "AMX" not in info, info


def test_version_and_package_data():
    assert pyllama.__version__ == "0.1.0"
    from importlib.resources import files

    assert files("pyllama").joinpath("_core.pyi").is_file()
    assert files("pyllama").joinpath("py.typed").is_file()


def test_generation_runs(llm):
    """The compiled kernels execute (a SIGILL here would kill the test process)."""
    out = llm.create_completion("Hello", max_tokens=4, temperature=0)
    assert out["usage"]["completion_tokens"] == 4
