"""Context shift keeps and discards what llama-server keeps and discards: ``--keep N``,
``--keep -1`` (the whole prompt), per-request ``n_keep`` / ``n_discard``. The same over-long
greedy generation on both servers, started alike, gives the same tokens; a different keep
gives different ones, so a keep that were ignored would fail here."""

from __future__ import annotations

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=300)

# 18 prompt tokens in a 256-token context (llama.cpp's least), 400 generated: two shifts or more
BASE = ("-c", "256", "-np", "1", "-t", "2", "--context-shift")
BODY = {
    "prompt": "List the planets of the solar system, one per line, with a fact about each:",
    "n_predict": 400,
    "temperature": 0,
    "ignore_eos": True,
    "return_tokens": True,
}
CASES = {
    "default": ((), {}),
    "keep-8": (("--keep", "8"), {}),
    "keep-all": (("--keep", "-1"), {}),
    "request": ((), {"n_keep": 12, "n_discard": 20}),
    "request-all": (("--keep", "4"), {"n_keep": -1, "n_discard": 7}),
}


def _run(url: str, extra: dict) -> dict:
    r = http.post(url + "/completion", json={**BODY, **extra})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["truncated"] is True  # the context did shift
    assert len(out["tokens"]) == BODY["n_predict"]
    return out


@pytest.fixture(scope="module")
def runs(smollm_path: str) -> dict[str, tuple[list[int], list[int]]]:
    """Each case's tokens from pyllama-server and llama-server."""
    out = {}
    for name, (flags, extra) in CASES.items():
        args = ("-m", smollm_path, *BASE, *flags)
        with running_server(*args) as ours, running_peer(*args) as peer:
            out[name] = (_run(ours, extra)["tokens"], _run(peer, extra)["tokens"])
    return out


@pytest.mark.flag_effect("--keep", "--context-shift")
@pytest.mark.parametrize("case", list(CASES))
def test_same_tokens_as_llama_server_over_a_shift(runs: dict, case: str) -> None:
    ours, peer = runs[case]
    assert ours == peer


@pytest.mark.flag_effect("--keep")
def test_what_is_kept_changes_the_text(runs: dict) -> None:
    """Every case keeps or drops something different, and it shows in the text."""
    texts = {name: tuple(ours) for name, (ours, _) in runs.items()}
    assert len(set(texts.values())) == len(texts), texts.keys()


def test_generation_settings_echo_what_was_used(smollm_path: str) -> None:
    with running_server("-m", smollm_path, *BASE, "--keep", "-1") as url:
        settings = _run(url, {"n_discard": 9})["generation_settings"]
        assert (settings["n_keep"], settings["n_discard"]) == (-1, 9)
