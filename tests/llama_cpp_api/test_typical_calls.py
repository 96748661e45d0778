"""The acceptance script: sixteen typical llama-cpp-python calls (``typical_calls.llama_cpp.txt``,
written for llama-cpp-python), run with only the import line changed, print the same
shapes as under llama-cpp-python 0.3.36 itself.

``typical_calls.llama_cpp_python.json`` is that script's output under llama-cpp-python,
recorded with (a venv from benchmarks/llama_cpp_python_venv.sh, plus huggingface_hub)::

    python tests/helpers/typical_calls.py ~/.cache/pyllama/bench-lcp-venv/bin/python \\
        llama_cpp SmolLM2-135M-Instruct.Q4_1.gguf all-MiniLM-L6-v2.F16.gguf
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.typical_calls import run

HERE = Path(__file__).resolve().parent

RECORDED = json.loads((HERE / "typical_calls.llama_cpp_python.json").read_text())


@pytest.mark.parametrize("module", ["pyllama.compat.llama_cpp", "pyllama"])
def test_typical_calls_match_llama_cpp_python(
    module: str, smollm_path: str, minilm_path: str
) -> None:
    ours = json.loads(run(sys.executable, module, smollm_path, minilm_path))
    assert len(RECORDED) == 17  # sixteen calls and the version
    for call, expected in RECORDED.items():
        assert ours[call] == expected, call
