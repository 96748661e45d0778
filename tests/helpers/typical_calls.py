"""Run ``tests/llama_cpp_api/typical_calls.llama_cpp.txt`` (a Python script written for
llama-cpp-python, kept as text: it imports ``llama_cpp``, which only its own venv has)
against a local fake hub, with a chosen import line.

    python tests/helpers/typical_calls.py PYTHON MODULE MODEL EMBEDDING_MODEL

MODULE ``llama_cpp`` runs the script as written (PYTHON being a venv with
llama-cpp-python and huggingface_hub); any other module replaces its two import lines
(``import MODULE as llama_cpp``, ``from MODULE import Llama, LlamaGrammar``). Prints the
script's JSON. Used by test_typical_calls.py and to record
tests/llama_cpp_api/typical_calls.llama_cpp_python.json.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from helpers.fake_hub import FakeFile, FakeHub, FakeRepo  # noqa: E402

REPO = "test-org/SmolLM2-135M-Instruct-GGUF"


def run(python: str, module: str, model: str, embedding_model: str) -> str:
    source = (TESTS / "llama_cpp_api" / "typical_calls.llama_cpp.txt").read_text()
    if module != "llama_cpp":
        source = source.replace("import llama_cpp\n", f"import {module} as llama_cpp\n", 1)
        source = source.replace("from llama_cpp import", f"from {module} import", 1)
    if module == "pyllama":
        # one call takes llama-cpp-python's named format chatml-function-calling, which the
        # compat layer registers when imported (the core never imports it)
        source = source.replace("\nimport", "\nimport pyllama.compat.llama_cpp  # noqa\nimport", 1)
    hub = FakeHub()
    with tempfile.TemporaryDirectory() as tmp, contextlib.closing(hub):
        hub.repos[REPO] = FakeRepo(
            {
                "README.md": FakeFile(b"# SmolLM2\n", lfs=False),
                "SmolLM2-135M-Instruct.Q4_1.gguf": FakeFile(Path(model)),
            }
        )
        script = Path(tmp) / "typical_calls.py"
        script.write_text(source)
        env = dict(
            os.environ,
            MODEL_ENDPOINT=hub.url,
            HF_ENDPOINT=hub.url,
            LLAMA_CACHE=str(Path(tmp) / "llama-cache"),
            HF_HOME=str(Path(tmp) / "hf-home"),
            HF_HUB_DISABLE_TELEMETRY="1",
        )
        done = subprocess.run(
            [python, str(script), model, embedding_model, REPO],
            env=env, cwd=tmp, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(
                f"typical_calls.py failed ({done.returncode}):\n{done.stderr[-4000:]}"
            )
        return done.stdout


if __name__ == "__main__":
    print(run(*sys.argv[1:5]), end="")
