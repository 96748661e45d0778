"""The options that print and exit: ``--version`` (pyllama's version and the llama.cpp
commit it was built from), ``--usage`` and ``--completion-bash`` (a bash completion
script for every option). Standard library only."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pyllama.server.flags.table import FlagTable

__all__ = ["LLAMA_CPP_COMMIT", "add_info_flags", "completion_script"]

# the llama.cpp commit ci/fetch_vendor.py pins (tests/package checks they agree)
LLAMA_CPP_COMMIT = "0c1e570"


class _Print(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        name = self.option_strings[-1]
        if name == "--version":
            from importlib.metadata import PackageNotFoundError, version

            try:
                ours = version("pyllama-engine")
            except PackageNotFoundError:
                ours = "unknown"
            print(f"version: pyllama {ours} (llama.cpp commit {LLAMA_CPP_COMMIT})")
        elif name == "--usage":
            parser.print_help()
        else:
            print(completion_script(parser), end="")
        parser.exit(0)


def completion_script(parser: argparse.ArgumentParser) -> str:
    words = sorted(s for a in parser._actions for s in a.option_strings)
    return (
        "_pyllama_server() {\n"
        '    local cur="${COMP_WORDS[COMP_CWORD]}"\n'
        f'    COMPREPLY=($(compgen -W "{" ".join(words)}" -- "$cur"))\n'
        "}\n"
        "complete -o default -F _pyllama_server pyllama-server\n"
    )


def add_info_flags(t: FlagTable) -> None:
    t.section("common")
    t.flag("--usage", action=_Print, help="print usage and exit")
    t.flag("--version", action=_Print, help="print pyllama's version and llama.cpp's commit")
    t.flag("--completion-bash", action=_Print, help="print a bash completion script")
