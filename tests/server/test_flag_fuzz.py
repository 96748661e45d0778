"""Hostile values for every pyllama-server option and LLAMA_ARG_* variable (issue 24,
deliverable 5): parsing either accepts the value or ends with argparse's usage error (exit 2,
one line naming the option); never another exception, which would reach the user as a
traceback. In-process through ``parse_args``, no server started."""

from __future__ import annotations

import contextlib
import io
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyllama.server.cli import parse_args
from pyllama.server.flags import build_parser

from helpers.fuzz_bodies import INTS, STRINGS

PARSER, ENVS = build_parser()
# options that take a value, by their first spelling
VALUED = sorted(
    {a.option_strings[0] for a in PARSER._actions if a.option_strings and a.nargs != 0}
    - {"-h", "--help"}
)
SPELLINGS = {a.option_strings[0]: a.option_strings for a in PARSER._actions if a.option_strings}
VARIABLES = sorted(var for var, _ in ENVS.values())
FLAG_OF = {
    var: next(
        (a.option_strings[0] for a in PARSER._actions if a.dest == dest and a.option_strings), ""
    )
    for dest, (var, _) in ENVS.items()
}
VALUES = st.one_of(
    st.sampled_from(STRINGS),
    st.sampled_from([str(i) for i in INTS]),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "0x10", "-0", "true", "on", ",", ",,", "a=b"]),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(max_size=20),
)
FUZZ = settings(
    # parse_args builds its parser each call (~25 ms): 400 cases in the suite, more with
    # PYLLAMA_FUZZ_EXAMPLES (the scan in docs/reliability.md ran every option x 39 values)
    max_examples=int(os.environ.get("PYLLAMA_FUZZ_EXAMPLES", "400")),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _parse(argv: list[str], environ: dict[str, str], names: list[str]) -> None:
    """``names``: the option's spellings or its variable, one of which the error must name."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse_args(argv, environ)
    except SystemExit as e:
        said = [x for x in err.getvalue().splitlines() if x.startswith("pyllama-server: error: ")]
        assert e.code == 2, f"{argv} {environ}: exit {e.code}"
        assert len(said) == 1, f"{argv} {environ}: {err.getvalue()}"
        assert any(n in said[0] for n in names), f"{argv} {environ}: {said[0]}"


def test_options_are_many() -> None:
    assert len(VALUED) > 150 and len(VARIABLES) > 150


@FUZZ
@given(option=st.sampled_from(VALUED), value=VALUES)
def test_hostile_option_values_are_accepted_or_refused_by_name(option: str, value: str) -> None:
    _parse(["-m", "model.gguf", option, value], {}, SPELLINGS[option])


@FUZZ
@given(variable=st.sampled_from(VARIABLES), value=VALUES.filter(lambda v: "\x00" not in v))
def test_hostile_variables_are_accepted_or_refused_by_name(variable: str, value: str) -> None:
    # (an environment cannot hold NUL: os.environ refuses it before pyllama sees it)
    names = [variable, *SPELLINGS.get(FLAG_OF[variable], [])]
    _parse(["-m", "model.gguf"], {variable: value}, names)
