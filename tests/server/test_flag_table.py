"""Every option of the vendored llama-server's --help, under each spelling and its
LLAMA_ARG_* variable, is taken by pyllama-server, except the ones listed in
flags_pending.txt (issue 20 works through them). The list is kept exact both ways: a
llama.cpp update that adds an option fails here until pyllama takes it or lists it, and a
handled option must leave the list.

Taken means one of two things (issue 38): pyllama-server acts on it, and a test carrying
``@pytest.mark.flag_effect`` shows it, or refuses it at start-up with one line naming it.
docs/compatibility.md's flag table (ci/flag_table.py writes it) says which, per option, and
must match the pinned --help, the code and the markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyllama.server.flags import build_parser

from helpers.flag_markers import flag_effect_tests
from helpers.flag_table import Row, build_rows, render, table_in_doc
from helpers.llama_help import server_options
from helpers.peer import require_peer

PENDING_FILE = Path(__file__).with_name("flags_pending.txt")


def _pending() -> set[str]:
    lines = PENDING_FILE.read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_every_llama_server_option_is_taken_or_pending() -> None:
    options = server_options(require_peer())
    assert len(options) > 200  # the --help parser read the whole table
    parser, envs = build_parser()
    ours = set(parser._option_string_actions)
    our_envs = {var for var, _ in envs.values()}
    missing = {s for o in options for s in o.spellings if s not in ours}
    missing |= {o.env for o in options if o.env and o.env not in our_envs}
    pending = _pending()
    assert sorted(missing - pending) == [], "new in llama-server: take them or list them"
    assert sorted(pending - missing) == [], "taken now: delete them from flags_pending.txt"


def test_help_sections_are_llama_servers() -> None:
    """``--help`` lists each option under llama-server's section for it."""
    options = server_options(require_peer())
    parser, _ = build_parser()
    section = {
        opt: group.title
        for group in parser._action_groups
        for action in group._group_actions
        for opt in action.option_strings
    }
    wrong = {
        o.spellings[-1]: (section.get(o.spellings[-1]), o.section)
        for o in options
        if section.get(o.spellings[-1]) != o.section and o.spellings[-1] not in ("-h", "--help")
    }
    assert wrong == {}


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return build_rows(require_peer())


def test_docs_flag_table_is_generated(rows: list[Row]) -> None:
    """docs/compatibility.md's table is what ci/flag_table.py writes now: the pinned
    --help, pyllama-server's answers to each spelling, and the tests' markers."""
    assert table_in_doc() == render(rows), "out of date: run python ci/flag_table.py"


UNPROVEN_FILE = Path(__file__).with_name("flags_unproven.txt")


def test_no_option_is_taken_without_an_effect_test(rows: list[Row]) -> None:
    """No third state: an option pyllama-server takes has a test that watches it act, but for
    the ones flags_unproven.txt names with the reason (issue 38 is open on them); the list is
    exact, so a new gap fails here and a closed one must leave it."""
    lines = UNPROVEN_FILE.read_text().splitlines()
    listed = {ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()}
    gaps = [r.option.spellings for r in rows if r.unproven]
    assert listed <= {s for g in gaps for s in g}, "these have an effect test now: delete them"
    assert [g[-1] for g in gaps if not set(g) & listed] == [], "taken without an effect test"


def test_refusals_name_the_option(rows: list[Row]) -> None:
    """A refused option says which one it is, never argparse's "unrecognized"."""
    bad = {}
    for row in rows:
        if row.refused:
            for argv, why in row.verdict.refused.items():
                named = any(s in why for s in row.option.spellings)
                if not named or "unrecognized" in why or "expected" in why:
                    bad[argv] = why
    assert bad == {}


def test_flag_effect_markers_name_llama_server_options() -> None:
    """A marker's spelling is one llama-server has (a typo would prove nothing)."""
    spellings = {s for o in server_options(require_peer()) for s in o.spellings}
    unknown = {s: sorted(t) for s, t in flag_effect_tests().items() if s not in spellings}
    assert unknown == {}
