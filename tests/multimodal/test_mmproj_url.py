"""``-mmu/--mmproj-url``: the projector is downloaded into llama.cpp's cache directory
(``$LLAMA_CACHE``) and loaded beside the model, which then takes images. The URL is a local
HTTP server handing out the tiny projector."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from helpers.servers import running_server


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(tiny_vlm: dict[str, Path], tmp_path: Path) -> Iterator[str]:
    """The base URL of a folder holding the tiny vision projector."""
    folder = tmp_path / "served"
    folder.mkdir()
    (folder / "mmproj-tiny.gguf").symlink_to(tiny_vlm["mmproj"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


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
