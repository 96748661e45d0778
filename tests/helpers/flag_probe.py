"""Ask pyllama-server whether it takes a llama-server option: its command-line parse and the
start-up checks that run before a model loads (``cli.parse_args``, then the tool flags'
registry), with a sensible value. A refusal is an exit with one line naming what is wrong."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path

from helpers.flag_values import INFO_SPELLINGS, enumerated_values, value_for
from helpers.llama_help import Option

__all__ = ["Verdict", "probe", "run_startup"]

_ERROR = "pyllama-server: error: "
_WARNING = "pyllama-server: warning: "


@dataclass
class Outcome:
    code: int | None  # None: started (no exit)
    message: str = ""  # the error line, or the warnings, without the program's prefix


@dataclass
class Verdict:
    """What pyllama-server does with one option."""

    refused: dict[str, str] = field(default_factory=dict)  # command line -> why
    accepted: list[str] = field(default_factory=list)  # command lines taken
    exits: list[str] = field(default_factory=list)  # spellings that print and exit 0
    values_refused: dict[str, str] = field(default_factory=dict)  # value -> why
    warnings: set[str] = field(default_factory=set)

    @property
    def is_refused(self) -> bool:
        return bool(self.refused) and not self.accepted and not self.exits


def run_startup(argv: list[str]) -> Outcome:
    """``pyllama-server ARGV`` up to the point where the model would load."""
    from pyllama.server.app import tools_from_settings
    from pyllama.server.cli import parse_args

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            settings = parse_args(argv, environ={})
            tools = tools_from_settings(settings)
            if tools is not None:
                tools.close()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
        lines = [ln for ln in err.getvalue().splitlines() if ln.startswith(_ERROR)]
        return Outcome(code, lines[-1][len(_ERROR) :] if lines else err.getvalue().strip())
    except ValueError as e:  # what serve() turns into one line and exit 1
        return Outcome(1, str(e))
    warnings = [ln[len(_WARNING) :] for ln in err.getvalue().splitlines() if _WARNING in ln]
    return Outcome(None, "\n".join(warnings))


def probe(option: Option, tmp: Path) -> Verdict:
    """Every spelling of ``option`` with a sensible value, then each value its --help
    lists (under its last spelling)."""
    verdict = Verdict()
    value = value_for(option, tmp)
    for spelling in option.spellings:
        argv = [spelling, *value]
        outcome = run_startup(argv)
        if outcome.code == 0:
            verdict.exits.append(spelling)
        elif outcome.code is not None:
            verdict.refused[" ".join(argv)] = outcome.message
        else:
            verdict.accepted.append(" ".join(argv))
            if outcome.message:
                verdict.warnings.add(outcome.message)
    if option.spellings[0] in INFO_SPELLINGS or verdict.is_refused:
        return verdict
    for v in enumerated_values(option):
        outcome = run_startup([option.spellings[-1], v])
        if outcome.code not in (None, 0):
            verdict.values_refused[v] = outcome.message
    return verdict
