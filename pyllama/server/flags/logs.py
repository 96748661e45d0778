"""llama-server's logging options (``--log-disable``, ``--log-file``, ``--log-jsonl``,
``--log-colors``, ``-lv``, ``--log-prefix``, ``--log-timestamps``) made into
``LogOptions``. Standard library only."""

from __future__ import annotations

import argparse

from pyllama.server.flags.table import FlagTable, env_bool
from pyllama.server.logs import LogOptions

__all__ = ["add_log_flags", "log_options"]


def add_log_flags(t: FlagTable) -> None:
    t.section("common")
    t.flag("--log-disable", action="store_true", help="no log output at all")
    t.flag("--log-file", env="LLAMA_ARG_LOG_FILE", metavar="FNAME", help="also log to this file")
    t.switch(
        ["--log-jsonl"],
        ["--no-log-jsonl"],
        "log_jsonl",
        "LLAMA_ARG_LOG_JSONL",
        "log as JSON lines on stdout, without colors (default: off)",
    )
    t.flag(
        "--log-colors",
        default="auto",
        env="LLAMA_ARG_LOG_COLORS",
        metavar="[on|off|auto]",
        help="colored log lines ('auto': when writing to a terminal)",
    )
    t.flag(
        "-lv",
        "--verbosity",
        "--log-verbosity",
        dest="log_verbosity",
        type=int,
        default=3,
        env="LLAMA_ARG_LOG_VERBOSITY",
        metavar="N",
        help="log lines up to: 0 generic, 1 error, 2 warning, 3 info (default), 4 trace",
    )
    t.switch(
        ["--log-prefix"],
        ["--no-log-prefix"],
        "log_prefix",
        "LLAMA_ARG_LOG_PREFIX",
        "a level letter before each line (default: off)",
    )
    t.switch(
        ["--log-timestamps"],
        ["--no-log-timestamps"],
        "log_timestamps",
        "LLAMA_ARG_LOG_TIMESTAMPS",
        "the time since start before each line (default: off)",
    )


def log_options(a: argparse.Namespace) -> LogOptions:
    colors = a.log_colors.strip().lower()
    if colors != "auto":
        try:
            colors = "on" if env_bool(colors) else "off"
        except argparse.ArgumentTypeError:
            raise ValueError(f"unknown value for --log-colors: '{a.log_colors}'") from None
    return LogOptions(
        disable=bool(a.log_disable),
        file=a.log_file,
        jsonl=bool(a.log_jsonl),
        colors=colors,
        verbosity=99 if a.verbose else a.log_verbosity,
        prefix=bool(a.log_prefix),
        timestamps=bool(a.log_timestamps),
    )
