"""Every command and Python example in the documents is run by a test: tests/docs runs the
unmarked ones; a block another test runs names that test, and one that cannot run here says
why (a GPU, a cluster, another platform, the package index)."""

from __future__ import annotations

import pytest

from helpers.doc_blocks import ROOT, all_blocks

BLOCKS = [b for b in all_blocks() if b.lang in ("python", "bash")]
MARKED = [b for b in BLOCKS if b.not_run or b.run_by]


def test_the_documents_have_examples_to_run():
    assert len(BLOCKS) - len(MARKED) >= 20, [b.id for b in BLOCKS]


@pytest.mark.parametrize("block", MARKED, ids=[b.id for b in MARKED])
def test_a_block_not_run_here_says_why(block):
    if block.run_by:
        target = ROOT / block.run_by
        assert target.is_file(), f"{block.id}: 'run by' names {block.run_by}, which does not exist"
        # the test it names reads this document (or the README, whose same block it runs), or
        # holds the command itself
        text = target.read_text(encoding="utf-8")
        page = block.path.relative_to(ROOT).as_posix()
        readme = [b.code for b in all_blocks() if b.path.name == "README.md"]
        first = block.code.strip().splitlines()[0]
        assert page in text or first in text or (block.code in readme and "README" in text), (
            f"{block.id}: {block.run_by} neither reads {page} nor runs `{first}`"
        )
    else:
        reason = block.not_run or ""
        assert len(reason.split()) >= 3, f"{block.id}: 'not run' needs a reason, got {reason!r}"
