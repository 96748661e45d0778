"""The tiny random multimodal model (tests/fixtures/tiny_vlm.py) and servers on it; the
ffmpeg program that video tests need (missing: those tests skip and say so;
PYLLAMA_REQUIRE_FFMPEG=1, as CI sets it, makes its absence an error)."""

from __future__ import annotations

import os
import shutil
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


@pytest.fixture(scope="session")
def ffmpeg() -> str:
    """The ffmpeg program, with ffprobe on PATH beside it."""
    found = shutil.which("ffmpeg")
    if found is None or shutil.which("ffprobe") is None:
        message = "ffmpeg and ffprobe not on PATH (Debian: apt-get install ffmpeg; CI installs it)"
        if os.environ.get("PYLLAMA_REQUIRE_FFMPEG") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found
