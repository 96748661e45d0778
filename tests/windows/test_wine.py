"""pyllama on Windows: python.org's CPython 3.13 with the cross-built win_amd64 wheel, run
under wine (tests/helpers/wine.py; ci/windows/check.sh builds the vehicle).

Each test runs the Windows interpreter as a user would: from a folder of its own, on the
real demo model, with its default event loop (the Proactor), and compares with what does
not depend on pyllama (llama.cpp's own llama-simple.exe from the same tree, the OpenAI,
Anthropic and Ollama clients run here on Linux).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.servers import free_port, wait_healthy
from helpers.wine import MISSING, Wine, winpath

pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING or "")

PROMPT = "The three laws of robotics are"
# llama-simple runs GGML_DEFAULT_N_THREADS (4) threads and has no flag for it: on 2 cores
# under wine its spinning barriers take ~3 s a token, so the comparison stays short
N_PREDICT = 12


@pytest.fixture(scope="module")
def wine() -> Wine:
    return Wine()


@pytest.fixture(scope="module")
def model(smollm_path: str) -> str:
    return winpath(smollm_path)


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_imports_from_any_folder(wine: Wine, tmp_path: Path) -> None:
    # not the package's folder nor the interpreter's: Windows must find pyllama/lib's DLLs
    # through the package itself (os.add_dll_directory), not the working directory
    code = "import os, pyllama, pyllama._core as c; print(os.getcwd()); print(c.module_dir())"
    for cwd in (tmp_path, wine.vehicle / "bin", Path("/")):
        out = _ok(wine.run("-c", code, cwd=cwd)).splitlines()
        assert out[-1].endswith("\\Lib\\site-packages\\pyllama"), out


def test_hardware_names_the_variant_pyllama_chose(wine: Wine, tmp_path: Path, model: str) -> None:
    out = _ok(wine.run("-m", "pyllama.hardware", cwd=tmp_path))
    m = re.search(r"^CPU: variant (\S+), score (\d+), (.+ggml-cpu-(\S+)\.dll)$", out, re.M)
    assert m, out
    variant = m.group(1)
    assert variant == m.group(4) and int(m.group(2)) > 0
    # ggml's own loader in llama.cpp's own program picks the same module from the same set
    simple = wine.run("-m", model, "-n", "1", "Hi", exe=wine.bin / "llama-simple.exe", cwd=wine.bin)
    loaded = re.search(r"ggml-cpu-(\S+)\.dll", simple.stderr)
    assert loaded, simple.stderr
    assert loaded.group(1) == variant


GREEDY = r"""
import sys
from pyllama import _core
from pyllama.engine import generate, make_task, open_engine
from pyllama.sampling import make_sampling_params

model = _core.Model(sys.argv[1])
engine = open_engine(model, n_parallel=1, n_ctx=512)
# as llama-simple: the prompt with its special tokens parsed, greedy, n tokens
task = make_task(model.tokenize(sys.argv[2], True, True), n_predict=int(sys.argv[3]),
                 sampling=make_sampling_params(temperature=0))
text = b"".join(e.text for e in generate(engine, task) if e.type == "token")
engine.stop()
sys.stdout.buffer.write(sys.argv[2].encode() + text)
"""


def test_greedy_text_equals_llama_cpps_own_build(wine: Wine, tmp_path: Path, model: str) -> None:
    simple = wine.run(
        "-m", model, "-n", str(N_PREDICT), PROMPT, exe=wine.bin / "llama-simple.exe", cwd=wine.bin
    )
    theirs = _ok(simple).rstrip("\n")
    script = tmp_path / "greedy.py"
    script.write_text(GREEDY)
    ours = _ok(wine.run(winpath(script), model, PROMPT, str(N_PREDICT), cwd=tmp_path))
    assert theirs.startswith(PROMPT) and len(theirs) > len(PROMPT) + 20, theirs
    assert ours == theirs


ASYNC_STREAMS = r"""
import asyncio, sys
from pyllama import Llama
from pyllama.engine import AsyncEngine, make_task
from pyllama._core import SamplingParams

async def main(path):
    loop = asyncio.get_running_loop()
    print(type(loop).__name__)
    engine = AsyncEngine.open(path, n_parallel=3, n_ctx=2048)
    tok = engine.engine.model.tokenize
    prompts = ["Hello, my name is", "The capital of France is", "Once upon a time"]
    sampling = SamplingParams()
    sampling.ignore_eos = True  # 16 tokens each, whatever the sampled text: a reply may end early
    async def one(p):
        task = make_task(tok(p, True, False), n_predict=16, sampling=sampling)
        pieces = [t async for t in engine.stream_text(task)]
        return len(pieces), "".join(pieces)
    results = await asyncio.gather(*(one(p) for p in prompts))
    engine.close()
    for n, text in results:
        print(n, repr(text))
    return results

asyncio.run(main(sys.argv[1]))
"""


def test_async_engine_streams_on_the_proactor_loop(wine: Wine, tmp_path: Path, model: str) -> None:
    script = tmp_path / "streams.py"
    script.write_text(ASYNC_STREAMS)
    out = _ok(wine.run(winpath(script), model, cwd=tmp_path)).splitlines()
    assert out[0] == "ProactorEventLoop"
    assert len(out) == 4
    for line in out[1:]:
        n, text = line.split(" ", 1)
        assert int(n) >= 8 and len(text) > 10, line  # pieces arrived one by one


def test_non_ascii_model_path_loads(wine: Wine, tmp_path: Path, smollm_path: str) -> None:
    folder = tmp_path / "modèles ünïcode 模型"
    folder.mkdir()
    shutil.copy(smollm_path, folder / "smöl-ë.gguf")
    code = "import sys, pyllama; m = pyllama.Model(sys.argv[1]); print(m.n_vocab)"
    out = _ok(wine.run("-c", code, winpath(folder / "smöl-ë.gguf"), cwd=tmp_path))
    assert int(out.split()[-1]) == 49152


@pytest.fixture(scope="module")
def server(wine: Wine, model: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``pyllama-server`` (``python -m pyllama.server``) under wine on 127.0.0.1."""
    log = tmp_path_factory.mktemp("wine-server") / "server.log"
    port = free_port()
    proc = wine.popen(
        "-m",
        "pyllama.server",
        "-m",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        "2048",
        "-np",
        "2",
        log=log,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, proc, timeout=180)
        except AssertionError as e:
            raise AssertionError(f"{e}:\n{log.read_text()}") from None
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


QUESTION = "What is the capital of France? Answer in one word."


def test_server_answers_the_openai_client(server: str) -> None:
    import openai

    with openai.OpenAI(base_url=server + "/v1", api_key="none") as client:
        reply = client.chat.completions.create(
            model="demo",
            messages=[{"role": "user", "content": QUESTION}],
            max_tokens=16,
            temperature=0,
        )
        assert reply.choices[0].message.content.strip()
        streamed = client.chat.completions.create(
            model="demo",
            messages=[{"role": "user", "content": QUESTION}],
            max_tokens=16,
            temperature=0,
            stream=True,
        )
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        assert text == reply.choices[0].message.content


def test_server_answers_the_anthropic_client(server: str) -> None:
    import anthropic

    with anthropic.Anthropic(base_url=server, api_key="none") as client:
        reply = client.messages.create(
            model="demo", max_tokens=16, messages=[{"role": "user", "content": QUESTION}]
        )
        assert reply.content[0].text.strip()
        assert reply.stop_reason in ("end_turn", "max_tokens")


def test_server_answers_the_ollama_client(server: str) -> None:
    import ollama

    with ollama.Client(host=server) as client:
        reply = client.chat(
            model="demo",
            messages=[{"role": "user", "content": QUESTION}],
            options={"temperature": 0, "num_predict": 16},
        )
        assert reply.message.content.strip()
        chunks = list(
            client.chat(
                model="demo",
                messages=[{"role": "user", "content": QUESTION}],
                options={"temperature": 0, "num_predict": 16},
                stream=True,
            )
        )
        assert "".join(c.message.content for c in chunks) == reply.message.content
