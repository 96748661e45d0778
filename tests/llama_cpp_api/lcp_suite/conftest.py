"""Runs llama-cpp-python's own tests/ (from its sdist) on the side ``LCP_SUITE_SIDE`` names:
``pyllama`` makes ``import llama_cpp`` resolve to pyllama.compat.llama_cpp first (the opt-in
alias users call), ``llama-cpp-python`` leaves the real package."""

from __future__ import annotations

import os

if os.environ.get("LCP_SUITE_SIDE") == "pyllama":
    import pyllama.compat.as_llama_cpp

    pyllama.compat.as_llama_cpp.install()
