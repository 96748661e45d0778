"""``-mu/--model-url``: the GGUF is downloaded once into llama.cpp's cache directory
(``$LLAMA_CACHE``), or into ``-m``'s path when given, where llama-server puts it, and used
from there (``--offline`` too); a split GGUF comes with all its parts. The URL is a local
HTTP server handing out real model files."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from fixtures.tiny_vlm import write_text_model
from helpers.peer import running_peer
from helpers.servers import running_server


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def files(smollm_path: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(base URL, served directory): the demo model and a 2-part split tiny model."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "smol.gguf").symlink_to(smollm_path)
    write_text_model(served / "tiny.gguf", tokenizer_source=smollm_path, shard_tensors=10)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def _answers(url: str) -> str:
    body = {"prompt": "Hi", "n_predict": 4, "temperature": 0}
    r = httpx.post(url + "/completion", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["content"]


@pytest.mark.flag_effect("--model-url")
def test_into_the_cache_then_offline(
    files: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    base, served = files
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "cache"))
    args = ("-mu", base + "/smol.gguf", "-c", "512", "-np", "1")
    with running_server(*args) as url:
        first = _answers(url)
    cached = tmp_path / "cache" / "smol.gguf"
    assert cached.read_bytes() == (served / "smol.gguf").read_bytes()
    assert [p.name for p in cached.parent.iterdir()] == ["smol.gguf"]  # no partial file left
    with running_server(*args, "--offline") as url:  # the cached file, as is
        assert _answers(url) == first


@pytest.mark.flag_effect("--model")
def test_into_the_model_path_as_llama_server(
    files: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """-m PATH -mu URL: the download goes to PATH (llama-server alone goes to router mode
    on -mu without -m, so the comparison names the path)."""
    base, served = files
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "unused"))
    answers = []
    for who, run in (("peer", running_peer), ("ours", running_server)):
        path = tmp_path / who / "model.gguf"
        path.parent.mkdir()
        with run("-m", str(path), "-mu", base + "/smol.gguf", "-c", "512", "-np", "1") as url:
            answers.append(_answers(url))
        assert path.read_bytes() == (served / "smol.gguf").read_bytes()
    assert answers[0] == answers[1]
    assert not (tmp_path / "unused").exists()


def test_a_split_model_comes_with_all_its_parts(
    files: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    base, served = files
    parts = ["tiny-00001-of-00002.gguf", "tiny-00002-of-00002.gguf"]
    answers = []
    for who, run in (("peer", running_peer), ("ours", running_server)):
        monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / who))
        with run(
            "-m", str(tmp_path / who / parts[0]), "-mu", f"{base}/{parts[0]}", "-c", "512"
        ) as url:
            answers.append(_answers(url))
        for p in parts:
            assert (tmp_path / who / p).read_bytes() == (served / p).read_bytes()
    assert answers[0] == answers[1]
