"""--spm-infill puts the suffix before the prefix in /infill's prompt (the answer changes,
and is llama-server's for the same command line); --no-escape keeps a --dry-sequence-breaker's
backslash sequences literal (/props shows them; llama-server's /props does not list the
breakers, so that half is pyllama's alone). SmolLM2 with FIM tokens declared
(tests/helpers/derived_models.py)."""

from __future__ import annotations

import httpx
import pytest

from helpers.derived_models import fim_model
from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy

INFILL = {
    "input_prefix": "def add(a, b):\n    ",
    "input_suffix": "\n    return c\n",
    "n_predict": 8,
    "temperature": 0,
}
BREAKER = ["--dry-sequence-breaker", r"a\nb"]


def answers(cmd: list[str]) -> tuple[list[str] | None, str]:
    """/props' DRY sequence breakers (None where not listed) and /infill's answer."""
    proc, url = start_process(cmd)
    try:
        wait_healthy(url, proc)
        props = httpx.get(url + "/props", timeout=30).json()["default_generation_settings"]
        r = httpx.post(url + "/infill", json=INFILL, timeout=60)
        assert r.status_code == 200, r.text
        return props["params"].get("dry_sequence_breakers"), r.json()["content"]
    finally:
        stop_process(proc)


@pytest.mark.flag_effect("--spm-infill", "--no-escape")
def test_spm_infill_and_no_escape(smollm_path: str) -> None:
    common = ["-m", fim_model(smollm_path), "-c", "512", "-t", "2", "--no-warmup", *BREAKER]
    plain = answers([*PYLLAMA_SERVER, *common])
    ours = answers([*PYLLAMA_SERVER, *common, "--spm-infill", "--no-escape"])
    theirs = answers([str(require_peer()), *common, "--spm-infill", "--no-escape"])
    assert plain[0] == ["a\nb"] and ours[0] == [r"a\nb"], (plain, ours)
    assert ours[1] == theirs[1] != plain[1], (plain, ours, theirs)
