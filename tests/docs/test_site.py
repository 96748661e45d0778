"""The documentation site builds with no warning (broken links, pages missing from the
navigation, API references that do not resolve), the README stays a quick start, and the
documents speak of the product, not of the work sessions that made it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from helpers.doc_blocks import MKDOCS, ROOT, documents


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    done = subprocess.run(
        [MKDOCS, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index.html", "benchmarks/index.html", "python/reference/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    # the reference is generated from the docstrings, not left empty
    reference = (tmp_path / "site" / "python/reference/index.html").read_text()
    assert "create_chat_completion" in reference and "llama-cpp-python" in reference


def test_readme_is_a_quick_start() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 150
    fences = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert fences[:2] == [
        'pip install ".[server]" && pyllama-server\n',
        'pip install ".[test]" && pytest\n',
    ]


def test_no_work_sessions_in_the_documents() -> None:
    pattern = re.compile(
        r"\bsessions? [0-9]|\brun[0-9]+|\b(this|next|earlier|previous) session\b"
        r"|\bthe \d{4}-\d\d-\d\d run\b",
        re.I,
    )
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in [*documents(), ROOT / "CHANGELOG.md"]
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    results = ROOT / "benchmarks" / "results"
    found += [
        str(p.relative_to(ROOT)) for p in results.rglob("*") if re.search(r"_(run|s)\d+", p.name)
    ]
    assert not found, "\n".join(found)
