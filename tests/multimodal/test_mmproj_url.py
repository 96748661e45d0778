"""``-mmu/--mmproj-url``: the projector is downloaded into llama.cpp's cache directory
(``$LLAMA_CACHE``) and loaded beside the model, which then takes images. The URL is a local
HTTP server handing out the tiny projector."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.servers import running_server
from helpers.static_http import serving


@pytest.fixture
def served(tiny_vlm: dict[str, Path], tmp_path: Path) -> Iterator[str]:
    """The base URL of a folder holding the tiny vision projector."""
    folder = tmp_path / "served"
    folder.mkdir()
    (folder / "mmproj-tiny.gguf").symlink_to(tiny_vlm["mmproj"])
    with serving(folder) as url:
        yield url


@pytest.mark.flag_effect("--mmproj-url")
def test_projector_from_a_url(tiny_vlm: dict[str, Path], served: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    args = ("-m", str(tiny_vlm["model"]), "-c", "512", "-np", "1", "-t", "2")
    env = {"LLAMA_CACHE": str(cache)}
    with running_server(*args, env=env) as url:  # the model alone sees no images
        assert httpx.get(url + "/props").json()["modalities"]["vision"] is False
    with running_server(*args, "-mmu", served + "/mmproj-tiny.gguf", env=env) as url:
        assert httpx.get(url + "/props").json()["modalities"]["vision"] is True
    assert (cache / "mmproj-tiny.gguf").read_bytes() == tiny_vlm["mmproj"].read_bytes()
