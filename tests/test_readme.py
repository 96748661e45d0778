"""The README's Python examples run as written (with the demo model)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, smollm_path, capsys):
    exec(
        compile(BLOCKS[index], f"README.md[python block {index}]", "exec"),
        {"__name__": "__readme__"},
    )
