"""The images-and-audio example of docs/server/multimodal.md, as written, against a server
on the tiny model with the image and audio projector (cat.png and speech.wav made in its
folder)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from helpers.media import png, wav

PAGE = Path(__file__).resolve().parents[2] / "docs" / "server" / "multimodal.md"
BLOCK = next(
    b for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S) if "image_url" in b
)


def test_the_docs_media_example_answers(
    omni_server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "cat.png").write_bytes(png(64, 64, seed=0))
    (tmp_path / "speech.wav").write_bytes(wav(1.0))
    monkeypatch.chdir(tmp_path)
    code = BLOCK.replace("http://127.0.0.1:8080", omni_server)
    code = code.replace("create(model=", "create(max_tokens=8, model=", 1)  # a short reply
    code = code.replace("file=f)", "file=f, extra_body={'max_tokens': 8})", 1)
    exec(compile(code, str(PAGE), "exec"), {})
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) >= 2, lines  # the description, then the transcript
    assert os.getcwd() == str(tmp_path)
