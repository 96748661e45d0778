"""A ``--mmproj`` that cannot be loaded stops the start with one line naming the flag, the
file and the projector's own reason, exit 2 as for a bad flag. llama-server logs the same
reason (it exits 1); pyllama said only "Failed to load CLIP model" and exited 1 (issue 38)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.tiny_pixtral import write_pixtral_projector
from fixtures.tiny_vlm import write_text_model
from helpers.peer import require_peer
from helpers.servers import free_port

EXIT_WITHIN_S = 120  # a failed start takes a few seconds on a loaded machine
COMMON = ("-c", "512", "-np", "1", "-t", "2")


@pytest.fixture(scope="module")
def pixtral(tmp_path_factory: pytest.TempPathFactory, smollm_path: str) -> Iterator[Path]:
    """A text model and a projector whose image token count has a minimum (Pixtral's)."""
    out = tmp_path_factory.mktemp("pixtral_errors")
    write_text_model(out / "model.gguf", tokenizer_source=smollm_path)
    write_pixtral_projector(out / "mmproj.gguf")
    yield out


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cmd, "--port", str(free_port())],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # the installed package, not the source tree
        timeout=EXIT_WITHIN_S,
    )


def _both(*args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """llama-server's run, and pyllama-server's one stderr line (exit 2 checked)."""
    peer = _run([str(require_peer()), *args, *COMMON])
    assert peer.returncode != 0, peer.stderr[-2000:]
    ours = _run([sys.executable, "-m", "pyllama.server", *args, *COMMON])
    lines = ours.stderr.strip().splitlines()
    assert ours.returncode == 2, ours.stderr
    assert len(lines) == 1, ours.stderr
    return peer, lines[0]


def test_a_projector_below_its_minimum_says_why(pixtral: Path) -> None:
    mmproj = str(pixtral / "mmproj.gguf")
    flags = ("-m", str(pixtral / "model.gguf"), "--mmproj", mmproj, "--image-max-tokens", "1")
    peer, line = _both(*flags)
    reason = "image_max_pixels (196) is less than image_min_pixels (1568)"
    assert reason in peer.stderr  # llama-server's log names it
    assert line == f"pyllama-server: --mmproj {mmproj}: {reason}"


def test_a_text_model_as_projector_says_it_is_none(smollm_path: str) -> None:
    peer, line = _both("-m", smollm_path, "--mmproj", smollm_path)
    # llama-server has nothing better to say: clip_init finds no encoder and throws nothing
    assert f"Failed to load CLIP model from {smollm_path}" in peer.stderr
    assert line.startswith(f"pyllama-server: --mmproj {smollm_path}: not a multimodal projector")
    assert "Failed to load CLIP model" not in line


def test_a_projector_for_another_model_says_why(
    smollm_path: str, tiny_vlm: dict[str, Path]
) -> None:
    mmproj = str(tiny_vlm["mmproj"])
    peer, line = _both("-m", smollm_path, "--mmproj", mmproj)
    reason = "mismatch between text model (n_embd = 576) and mmproj (n_embd = 64)"
    assert reason in peer.stderr
    assert line.startswith(f"pyllama-server: --mmproj {mmproj}: {reason}")


def test_a_projector_that_is_no_gguf_file(smollm_path: str, tmp_path: Path) -> None:
    mmproj = tmp_path / "mmproj.gguf"
    mmproj.write_text("not a projector\n")
    _, line = _both("-m", smollm_path, "--mmproj", str(mmproj))
    assert line.startswith(f"pyllama-server: --mmproj {mmproj}: not a GGUF file")
