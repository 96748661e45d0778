"""The README's Python examples run as written (with the demo model)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
# the images-and-audio example needs a multimodal model: tests/multimodal/test_readme_media.py
BLOCKS = [
    b
    for b in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    if "image_url" not in b
]


def test_readme_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, smollm_path, capsys, request):
    code = BLOCKS[index]
    if "http://127.0.0.1:8080" in code:  # a client example: point it at a running server
        code = code.replace("http://127.0.0.1:8080", request.getfixturevalue("server"))
    exec(
        compile(code, f"README.md[python block {index}]", "exec"),
        {"__name__": "__readme__"},
    )
    # each example prints what it got: text the model wrote, not an empty line
    assert "print(" in code
    assert capsys.readouterr().out.strip()
