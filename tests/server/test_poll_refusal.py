"""--poll, --poll-batch, --poll-draft and --poll-batch-draft: ggml reads the polling level
only in its own thread pool (ggml-cpu.c, ``#ifndef GGML_USE_OPENMP``); a CPU backend built
with OpenMP, as pyllama's and the peer llama-server's are, runs its compute threads in
OpenMP's pool and never looks at it. So pyllama-server takes the default level (50) and
refuses any other at start-up with one line naming the option (exit 2), rather than
parse it and ignore it."""

from __future__ import annotations

import subprocess

import pytest

from pyllama import system_info

from helpers.flag_probe import run_startup
from helpers.servers import PYLLAMA_SERVER

OPENMP = "OPENMP = 1" in system_info()
# every spelling, and the option its refusal names
SPELLINGS = {
    "--poll": "--poll",
    "--poll-batch": "--poll-batch",
    "--spec-draft-poll": "--poll-draft",
    "--poll-draft": "--poll-draft",
    "--spec-draft-poll-batch": "--poll-batch-draft",
    "--poll-batch-draft": "--poll-batch-draft",
}


def test_this_build_runs_the_compute_threads_with_openmp() -> None:
    """The premise of the refusal (pyllama's CPU backend; CMake's GGML_OPENMP is on by
    default): a build without OpenMP would honour the level, and the test below says so."""
    assert OPENMP, system_info()


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("value", ["0", "100"])
def test_a_polling_level_other_than_the_default_is_refused(spelling: str, value: str) -> None:
    outcome = run_startup([spelling, value])
    if not OPENMP:
        assert outcome.code is None, outcome.message  # ggml's own pool reads it
        return
    assert outcome.code == 2
    assert outcome.message.startswith(f"{SPELLINGS[spelling]} {value}: ")
    assert "OpenMP" in outcome.message


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_default_level_is_taken(spelling: str) -> None:
    assert run_startup([spelling, "50"]).code is None


def test_the_server_exits_with_one_line_before_loading_anything(tmp_path) -> None:
    """The command line as a user runs it: exit 2, the reason on one error line, and no
    model looked at (the path does not exist)."""
    run = subprocess.run(
        [*PYLLAMA_SERVER, "-m", str(tmp_path / "absent.gguf"), "--poll", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("pyllama-server: error:")]
    assert run.returncode == (2 if OPENMP else 1), run.stderr
    if OPENMP:
        assert errors == [
            "pyllama-server: error: --poll 0: the CPU backend runs its threads with OpenMP, "
            "which never reads ggml's polling level (only the default, 50, is taken)"
        ]
        assert "absent.gguf" not in run.stderr
