"""Options that act before any model loads: the ones that print and exit (--version,
--help, --completion-bash, --cache-list, --list-devices), and the logging options, seen on
the one line a server that cannot find its model writes before it exits."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pyllama.server.cli import parse_args

from helpers.peer import require_peer


def _info(flag: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        parse_args([flag], environ={})
    assert e.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "printed"),
    [
        pytest.param("--version", "version: pyllama ", marks=pytest.mark.flag_effect("--version")),
        pytest.param("-h", "--ctx-size", marks=pytest.mark.flag_effect("--help")),
        pytest.param("--usage", "usage: pyllama-server", marks=pytest.mark.flag_effect("--usage")),
        pytest.param(
            "--completion-bash",
            "complete -o default -F _pyllama_server pyllama-server",
            marks=pytest.mark.flag_effect("--completion-bash"),
        ),
        pytest.param(
            "--list-devices",
            "Available devices:\n",
            marks=pytest.mark.flag_effect("--list-devices"),
        ),
    ],
)
def test_an_info_option_prints_and_exits(
    flag: str, printed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert printed in _info(flag, capsys)


@pytest.mark.flag_effect("--cache-list")
def test_cache_list_counts_as_llama_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path))
    theirs = subprocess.run(
        [str(require_peer()), "--cache-list"], capture_output=True, text=True, timeout=60
    ).stdout
    assert _info("--cache-list", capsys).strip() == theirs.strip() != ""


def _missing_model(*flags: str) -> str:
    """What ``pyllama-server -m MISSING FLAGS`` writes (stdout and stderr) before it exits."""
    r = subprocess.run(
        [sys.executable, "-m", "pyllama.server", "-m", "/nonexistent/m.gguf", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tempfile.gettempdir(),  # the installed package, not the source tree
    )
    assert r.returncode == 1
    return r.stdout + r.stderr


PLAIN = "pyllama-server: cannot load model /nonexistent/m.gguf: no such file\n"


def test_the_plain_line() -> None:
    assert _missing_model() == PLAIN


@pytest.mark.parametrize(
    ("flags", "pattern"),
    [
        pytest.param(["--log-disable"], r"", marks=pytest.mark.flag_effect("--log-disable")),
        pytest.param(["-lv", "0"], r"", marks=pytest.mark.flag_effect("--log-verbosity")),
        pytest.param(
            ["--log-jsonl"],
            r'\{"timestamp": [\d.]+, "level": "error", "logger": "pyllama.server", '
            r'"message": "cannot load model /nonexistent/m.gguf: no such file"\}\n',
            marks=pytest.mark.flag_effect("--log-jsonl"),
        ),
        pytest.param(
            ["--log-colors", "on"],
            re.escape("\033[31m" + PLAIN.rstrip("\n") + "\033[0m\n"),
            marks=pytest.mark.flag_effect("--log-colors"),
        ),
        pytest.param(
            ["--log-timestamps"],
            r"\d+\.\d\d\.\d\d\d\.\d\d\d " + re.escape(PLAIN),
            marks=pytest.mark.flag_effect("--log-timestamps"),
        ),
        pytest.param(
            ["--log-prefix"], re.escape("E " + PLAIN), marks=pytest.mark.flag_effect("--log-prefix")
        ),
    ],
)
def test_a_logging_option_shapes_the_line(flags: list[str], pattern: str) -> None:
    assert re.fullmatch(pattern, _missing_model(*flags))
