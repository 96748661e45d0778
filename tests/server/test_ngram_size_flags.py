"""The n-gram drafters' size and hit options (``--spec-ngram-*-size-m``, ``-min-hits``,
``--spec-ngram-mod-n-max``, ``--spec-ngram-simple-size-n``) and the draft model's
``--spec-draft-n-min`` / ``--draft-p-min``: a value other than the default gives other draft
counts, and the counts are llama-server's, started alike. (The text is plain decoding's.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=300)

TEXT = (
    "The quick brown fox jumps over the lazy dog. " * 3 + "Pack my box with five dozen jugs. " * 3
)
COPY = {
    "prompt": "Copy the text.\n" + TEXT + "\nCopy:\n" + TEXT,
    "n_predict": 48,
    "temperature": 0,
    "return_tokens": True,
}
BASE = ("-c", "2048", "-np", "1", "-t", "2")
SIMPLE = ("--spec-type", "ngram-simple")
MAP_K = ("--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "4")
MAP_K4V = ("--spec-type", "ngram-map-k4v", "--spec-ngram-map-k4v-size-n", "3")
MOD = ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "2")
# the demo model drafting for itself (MODEL: its path); -md alone drafts nothing
DRAFT = ("-md", "MODEL", "--spec-type", "draft-simple", "--spec-draft-n-max", "3")


def _case(mark: Any, value: str, kind: tuple[str, ...]) -> Any:
    """``kind``'s server with the flag ``mark`` names set to ``value``."""
    flag = mark.args[0]
    return pytest.param(kind, (flag, value), id=flag, marks=mark)


CASES = [
    _case(pytest.mark.flag_effect("--spec-ngram-simple-size-n"), "3", SIMPLE),
    _case(pytest.mark.flag_effect("--spec-ngram-simple-size-m"), "4", SIMPLE),
    _case(pytest.mark.flag_effect("--spec-ngram-map-k-size-m"), "4", MAP_K),
    _case(pytest.mark.flag_effect("--spec-ngram-map-k4v-size-m"), "4", MAP_K4V),
    _case(pytest.mark.flag_effect("--spec-ngram-map-k4v-min-hits"), "2", MAP_K4V),
    _case(pytest.mark.flag_effect("--spec-ngram-mod-n-max"), "6", MOD),
    # the pinned llama-server takes no per-request speculative.n_min / p_min (server-schema.cpp
    # has them under #if 0), so each needs its own server
    _case(pytest.mark.flag_effect("--spec-draft-n-min"), "3", DRAFT),
    _case(pytest.mark.flag_effect("--draft-p-min"), "0.9", DRAFT),
]


def _drafts(url: str, **extra: object) -> tuple[list[int], int, int]:
    """The copy's tokens and its (drafted, accepted) counts (0, 0 when nothing drafted)."""
    r = http.post(url + "/completion", json={**COPY, **extra})
    assert r.status_code == 200, r.text
    out = r.json()
    t = out["timings"]
    return out["tokens"], t.get("draft_n", 0), t.get("draft_n_accepted", 0)


@pytest.mark.parametrize(("kind", "flag"), CASES)
def test_other_value_other_drafts_as_llama_server(
    smollm_path: str, kind: tuple[str, ...], flag: tuple[str, str]
) -> None:
    args = ("-m", smollm_path, *BASE, *(smollm_path if a == "MODEL" else a for a in kind))
    with running_peer(*args) as peer:
        default = _drafts(peer)
    with running_server(*args, *flag) as ours, running_peer(*args, *flag) as peer:
        got, want = _drafts(ours), _drafts(peer)
    assert got == want
    assert got[0] == default[0]  # drafts change the speed, never the text
    assert got[1:] != default[1:], f"{flag[0]} {flag[1]} drafts as its default does"


@pytest.mark.flag_effect("--spec-ngram-simple-min-hits", "--spec-ngram-map-k-min-hits")
@pytest.mark.parametrize(
    ("kind", "flag"),
    [
        (SIMPLE, "--spec-ngram-simple-min-hits"),
        (MAP_K, "--spec-ngram-map-k-min-hits"),
    ],
)
def test_min_hits_of_key_only_drafters_change_nothing_as_in_llama_server(
    smollm_path: str, kind: tuple[str, ...], flag: str
) -> None:
    """llama-server takes these and reads neither: ngram-simple's config has no min_hits and
    ngram-map-k is key-only, whose draft is made before min_hits is looked at
    (common/ngram-map.cpp). Two values, the drafts of llama-server on both."""
    args = ("-m", smollm_path, *BASE, *kind)
    counts = []
    for value in ("1", "3"):
        with running_server(*args, flag, value) as ours, running_peer(*args, flag, value) as peer:
            got = _drafts(ours)
            assert got == _drafts(peer)
            assert got[1] > 0
            counts.append(got)
    assert counts[0] == counts[1]
