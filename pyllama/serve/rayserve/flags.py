"""pyllama-server's flags for a replica, checked where the application is built.

``serve run`` should fail on the driver with argparse's own line, not later inside a
replica's constructor; the replica parses the same list again where it starts.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from typing import Any

__all__ = ["parse_server_args"]


def parse_server_args(argv: Sequence[str]) -> Any:
    """The ``Settings`` for pyllama-server ``argv``; ``ValueError`` with argparse's message
    for bad flags, or for router mode (a replica serves one model: give -m or -hf)."""
    from pyllama.server.cli import parse_args

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            settings = parse_args(list(argv))
    except SystemExit as e:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error:" in ln]  # argparse's line, not the hint after
        why = (errors or lines or [f"exit status {e.code}"])[-1]
        raise ValueError(f"pyllama-server {' '.join(argv)}: {why}") from None
    if settings.router:
        raise ValueError("a replica serves one model: give --model PATH or -hf REPO in server_args")
    return settings
