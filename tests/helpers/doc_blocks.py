"""The code blocks of the documents (README.md and the site's pages under docs/), each with
what the docs say of running it: a comment just above a fence,
``<!-- not run: REASON -->`` or ``<!-- run by: PATH -->``, else tests/docs runs it."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the command, not `python -m mkdocs`: that would put the working directory (the source tree,
# without the compiled module) in front of the installed package the API reference reads
MKDOCS = str(Path(sys.executable).with_name("mkdocs"))
# commands and Python examples; other fences (yaml, json, ini, text) are data, not examples
RUNNABLE = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)[^\n]*$")
MARK = re.compile(r"^<!--\s*(not run|run by):\s*(.+?)\s*-->$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str  # "python", "bash", or the fence's own word for the others
    code: str
    not_run: str | None = None  # the reason given
    run_by: str | None = None  # the path of the test that runs it

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, word = m.group(1), m.group(2).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(fence)), None)
        assert end is not None, f"{path}:{i + 1}: a code block is never closed"
        # the comments just above the fence (other tests name blocks with their own)
        above = i - 1
        mark = None
        while above >= 0 and lines[above].startswith("<!--") and mark is None:
            mark = MARK.match(lines[above].strip())
            above -= 1
        kind, text = (mark.group(1), mark.group(2)) if mark else (None, None)
        out.append(
            Block(
                path=path,
                line=i + 1,
                lang=RUNNABLE.get(word, word),
                code="\n".join(lines[i + 1 : end]) + "\n",
                not_run=text if kind == "not run" else None,
                run_by=text if kind == "run by" else None,
            )
        )
        i = end + 1
    return out


def all_blocks() -> list[Block]:
    return [b for p in documents() for b in blocks(p)]


def examples() -> list[Block]:
    """The blocks tests/docs runs itself."""
    return [
        b
        for b in all_blocks()
        if b.lang in ("python", "bash") and b.not_run is None and b.run_by is None
    ]
