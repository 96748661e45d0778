#!/usr/bin/env python3
"""Rewrite docs/compatibility.md's flag table from the pinned llama-server's --help, the
pyllama-server in this checkout and the tests' ``flag_effect`` markers
(tests/helpers/flag_table.py says how). tests/server/test_flag_table.py fails until the
committed table is what this writes.

    usage: python ci/flag_table.py [--check]
    LLAMA_SERVER_BIN  the llama-server to read (default: ci/build_peer.sh's output,
                      $PYLLAMA_CACHE/peer/bin/llama-server)
    --check           write nothing; exit 1 if the table is out of date, and list the options
                      pyllama takes with no effect test
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.flag_table import build_rows, render, splice, table_in_doc
from helpers.peer import PEER


def main(argv: list[str]) -> int:
    if not PEER.is_file():
        print(f"flag_table: no llama-server at {PEER}: run ci/build_peer.sh", file=sys.stderr)
        return 2
    rows = build_rows(PEER)
    table = render(rows)
    unproven = [r.option.spellings[-1] for r in rows if r.unproven]
    if unproven:
        print(f"{len(unproven)} options taken with no effect test: {' '.join(unproven)}")
    if "--check" in argv:
        if table_in_doc() != table:
            print("docs/compatibility.md's flag table is out of date: python ci/flag_table.py")
            return 1
        return 0
    print("docs/compatibility.md:", "rewritten" if splice(table) else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
