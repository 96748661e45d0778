"""LangChain's and LlamaIndex's llama.cpp classes, unchanged, on pyllama: each app in
``integrations/`` runs under ``python -m pyllama.compat.as_llama_cpp`` (``import
llama_cpp`` is pyllama's), and what it answers is what pyllama's ``Llama`` answers to the
same call with the parameters that class passes (greedy, so one answer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyllama import Llama

from helpers.pure_wheel import unpacked_wheel

HERE = Path(__file__).resolve().parent / "integrations"
pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 10), reason="LangChain and LlamaIndex need Python 3.10"
)
PROMPT = "The capital of France is"
QUESTION = "What is the capital of France?"


def _app(script: str, model: str, tmp_path: Path, path: Path | None = None) -> dict:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
    r = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-m", "pyllama.compat.as_llama_cpp",
         str(HERE / script), model],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def llm(smollm_path: str) -> Llama:
    return Llama(smollm_path, n_ctx=512, verbose=False)


def test_langchain_llamacpp_and_chatllamacpp(smollm_path: str, tmp_path: Path) -> None:
    out = _app("langchain_app.py", smollm_path, tmp_path)
    # the model as LangChain's classes load it: their own defaults (a rope base of 10000
    # whatever the model's, 8-token batches) reach Llama and change its answers
    llm = Llama(
        smollm_path, n_ctx=512, n_batch=8, rope_freq_base=10000.0, rope_freq_scale=1.0,
        last_n_tokens_size=64, n_parts=-1, f16_kv=True, verbose=False,
    )  # fmt: skip
    # LangChain's defaults beside temperature=0, max_tokens=16
    sampling = {"temperature": 0, "max_tokens": 16, "top_p": 0.95, "top_k": 40,
                "repeat_penalty": 1.1}  # fmt: skip
    text = llm.create_completion(PROMPT, **sampling)["choices"][0]["text"]
    assert out["invoke"] == text and out["stream"] == text
    assert out["num_tokens"] == len(llm.tokenize(b"hello world"))
    messages = [{"role": "user", "content": QUESTION}]
    reply = llm.create_chat_completion(messages=messages, **sampling)
    assert out["chat"] == reply["choices"][0]["message"]["content"] == out["chat_stream"]


def test_llama_index_llamacpp(smollm_path: str, llm: Llama, tmp_path: Path) -> None:
    package = unpacked_wheel("llama-index-llms-llama-cpp==0.7.0")
    out = _app("llama_index_app.py", smollm_path, tmp_path, package)
    assert out["context_window"] == 512  # Llama.context_params.n_ctx
    text = llm.create_completion(PROMPT, temperature=0, max_tokens=16)["choices"][0]["text"]
    assert out["complete"] == text and out["stream"] == text
    chat = llm.create_completion(out["chat_prompt"], temperature=0, max_tokens=16)
    assert out["chat"] == chat["choices"][0]["text"]
