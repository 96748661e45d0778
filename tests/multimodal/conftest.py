"""The tiny random multimodal model (tests/fixtures/tiny_vlm.py) and servers on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.tiny_vlm import write_all
from helpers.servers import running_server


@pytest.fixture(scope="session")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory, smollm_path: str) -> dict[str, Path]:
    """model.gguf, mmproj.gguf (image, Gemma 3's projector), mmproj-audio.gguf (Ultravox's),
    mmproj-omni.gguf (both)."""
    return write_all(tmp_path_factory.mktemp("tiny_vlm"), tokenizer_source=smollm_path)


@pytest.fixture(scope="session")
def omni_server(tiny_vlm: dict[str, Path]) -> Iterator[str]:
    """pyllama-server on the tiny model with the image and audio projector."""
    with running_server(
        "-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj_omni"]),
        "-c", "2048", "-np", "2", "-t", "2",
    ) as url:  # fmt: skip
        yield url
