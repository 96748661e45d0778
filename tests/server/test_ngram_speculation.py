"""n-gram self-speculation (``--spec-type ngram-*``, ``--spec-default``, ``-lcs``/``-lcd``):
the drafts come from the slot's own tokens and are verified by the model, so the output is
plain decoding's; the draft counts are llama-server's, started alike, for every kind."""

from __future__ import annotations

import concurrent.futures as cf
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=180)

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

KINDS = {
    "simple": ("--spec-type", "ngram-simple"),
    "map-k": ("--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "4"),
    "map-k4v": ("--spec-type", "ngram-map-k4v", "--spec-ngram-map-k4v-size-n", "3"),
    "default": ("--spec-default",),
    "cache": ("--spec-type", "ngram-cache"),
    # two kinds: each step the first that drafts wins (llama.cpp's order)
    "map-k,mod": (
        "--spec-type", "ngram-map-k,ngram-mod", "--spec-ngram-map-k-size-n", "4",
        "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "2",
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def plain(smollm_path: str) -> list[int]:
    """The copy's tokens without speculation."""
    with running_server("-m", smollm_path, *BASE) as url:
        return http.post(url + "/completion", json=COPY).json()["tokens"]


def _copy(url: str, **extra: object) -> dict:
    r = http.post(url + "/completion", json={**COPY, **extra})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.flag_effect(
    "--spec-default",
    "--spec-ngram-map-k-size-n",
    "--spec-ngram-map-k4v-size-n",
    "--spec-ngram-mod-n-match",
    "--spec-ngram-mod-n-min",
)
def test_same_output_and_drafts_as_llama_server(smollm_path: str, plain: list[int], kind: str):
    args = ("-m", smollm_path, *BASE, *KINDS[kind])
    with running_server(*args) as ours, running_peer(*args) as peer:
        a, b = _copy(ours), _copy(peer)
        assert a["tokens"] == b["tokens"] == plain
        ta, tb = a["timings"], b["timings"]
        assert ta["draft_n"] > 0
        assert (ta["draft_n"], ta["draft_n_accepted"]) == (tb["draft_n"], tb["draft_n_accepted"])
        slot = http.get(ours + "/slots").json()[0]
        assert slot["speculative"] is True


@pytest.mark.flag_effect("--spec-default")
def test_spec_default_changes_no_output(smollm_path: str):
    """Sampled text, a per-request cap, two slots at once: still plain decoding's."""
    sampled = {**COPY, "temperature": 0.8, "top_k": 40, "seed": 7}
    count = "One two three four five six seven eight nine ten. " * 4
    other = {**COPY, "prompt": "Copy the text.\n" + count + "\nCopy:\n" + count}
    two = ("-m", smollm_path, "-c", "4096", "-np", "2", "-t", "2")
    with running_server(*two) as url:
        want_sampled = _copy(url, **sampled)["tokens"]
        want = [http.post(url + "/completion", json=b).json()["tokens"] for b in (COPY, other)]
    with running_server(*two, "--spec-default") as url:
        got = _copy(url, **sampled)
        assert got["tokens"] == want_sampled
        capped = _copy(url, **{"speculative.n_max": 0})
        assert capped["tokens"] == want[0] and "draft_n" not in capped["timings"]
        assert capped["generation_settings"]["speculative.types"] == "none,ngram-mod"
        with cf.ThreadPoolExecutor(2) as pool:
            both = list(
                pool.map(lambda b: http.post(url + "/completion", json=b).json(), (COPY, other))
            )
        assert [r["tokens"] for r in both] == want
        assert both[0]["timings"]["draft_n_accepted"] > 0


def _lookup_cache(path: Path, records: dict[tuple[int, ...], dict[int, int]]) -> Path:
    """A file in llama.cpp's n-gram cache format (what llama-lookup-create writes)."""
    with path.open("wb") as f:
        for ngram, following in records.items():
            f.write(struct.pack("<4i", *ngram, *[-1] * (4 - len(ngram))))
            f.write(struct.pack("<i", len(following)))
            for token, count in following.items():
                f.write(struct.pack("<2i", token, count))
    return path


@pytest.mark.flag_effect("--lookup-cache-static")
def test_static_lookup_cache(smollm_path: str, plain: list[int], tmp_path: Path):
    """-lcs: its statistics steer ngram-cache's drafts; llama-server drafts alike."""
    # the copy's own bigrams, as a static cache built from this text would hold them
    records: dict[tuple[int, ...], dict[int, int]] = {}
    for i in range(len(plain) - 2):
        records.setdefault((plain[i], plain[i + 1]), {})[plain[i + 2]] = 5
    cache = _lookup_cache(tmp_path / "static.bin", records)
    args = ("-m", smollm_path, *BASE, "--spec-type", "ngram-cache", "-lcs", str(cache))
    with running_server(*args) as ours, running_peer(*args) as peer:
        a, b = _copy(ours), _copy(peer)
    assert a["tokens"] == b["tokens"] == plain
    assert (a["timings"]["draft_n"], a["timings"]["draft_n_accepted"]) == (
        b["timings"]["draft_n"],
        b["timings"]["draft_n_accepted"],
    )


def _start_fails(*flags: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "pyllama.server", *flags, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.gettempdir(),
    )
    assert r.returncode != 0
    return r.stderr


@pytest.mark.parametrize(
    ("records", "why"),
    [
        (b"\x01\x00\x00\x00" * 4 + struct.pack("<i", 0), "empty record"),  # no following token
        (struct.pack("<4i", 1, -1, -1, -1) + struct.pack("<i3i", 2, 5, 3, 9), "truncated"),
        (struct.pack("<4i", 1, -1, -1, -1) + struct.pack("<3i", 1, 10**8, 1), "vocabulary"),
        (struct.pack("<4i", 1, -1, -1, -1) + struct.pack("<3i", 1, 5, 0), "not positive"),
    ],
    ids=["empty", "truncated", "vocabulary", "count"],
)
@pytest.mark.flag_effect("--lookup-cache-dynamic")
def test_a_malformed_lookup_cache_is_an_error_naming_it(
    smollm_path: str, tmp_path: Path, records: bytes, why: str
):
    """llama.cpp aborts the process on these; pyllama-server refuses to start, naming it."""
    bad = tmp_path / "bad.bin"
    bad.write_bytes(records)
    err = _start_fails(
        "-m", smollm_path, "-c", "512", "--spec-type", "ngram-cache", "-lcd", str(bad)
    )
    assert str(bad) in err and why in err
