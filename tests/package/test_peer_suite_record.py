"""The record of llama.cpp's own server suite run on both servers (ci/peer_tests.sh, its
results in benchmarks/results/peer_suite_*.json) agrees with docs/compatibility.md: every
test llama-server passes and pyllama-server fails is one the document lists as a
deliberate difference, with its reason, and every test listed there does fail on pyllama
in that run, so a new failure cannot hide among the listed ones and a fixed one cannot
stay listed. Reads files only: the run itself takes both servers and half an hour."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compatibility.md"
HEADING = "### Deliberate differences"


def _record() -> dict:
    runs = sorted((ROOT / "benchmarks" / "results").glob("peer_suite_*.json"))
    assert runs, "no benchmarks/results/peer_suite_*.json: run ci/peer_tests.sh"
    return json.loads(runs[-1].read_text())


def _listed() -> dict[str, str]:
    """Test id -> reason, from the table under HEADING."""
    text = DOC.read_text(encoding="utf-8")
    assert HEADING in text, f"{DOC.name} has no '{HEADING}' section"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    out = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([^`]+)` \| (.*) \|$", line.strip())
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def _fails(record: dict) -> set[str]:
    a = record["servers"]["llama-server"]["tests"]
    b = record["servers"]["pyllama"]["tests"]
    return {
        n
        for n, t in a.items()
        if t["outcome"] == "passed" and b.get(n, {}).get("outcome") in ("failed", "error", None)
    }


def test_the_record_is_a_whole_run_of_both_servers() -> None:
    record = _record()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", record["date"])
    assert re.fullmatch(r"[0-9a-f]{7,40}", record["commit"])
    for name in ("llama-server", "pyllama"):
        tests = record["servers"][name]["tests"]
        assert len(tests) >= 380, (name, len(tests))  # the non-slow suite: 391 tests


def test_every_test_pyllama_fails_is_a_listed_difference_and_no_more() -> None:
    fails, listed = _fails(_record()), _listed()
    assert sorted(fails - set(listed)) == [], "failing on pyllama, not listed in compatibility.md"
    assert sorted(set(listed) - fails) == [], (
        "listed in compatibility.md, not failing in the record"
    )


def test_each_listed_difference_says_why() -> None:
    short = {t: r for t, r in _listed().items() if len(r.split()) < 8}
    assert short == {}, "a deliberate difference needs its reason"
