"""Every option of the vendored llama-server's --help, under each spelling and its
LLAMA_ARG_* variable, is taken by pyllama-server, except the ones listed in
flags_pending.txt (issue 20 works through them). The list is kept exact both ways: a
llama.cpp update that adds an option fails here until pyllama takes it or lists it, and a
handled option must leave the list."""

from __future__ import annotations

from pathlib import Path

from pyllama.server.flags import build_parser

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
