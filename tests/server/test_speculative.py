"""Speculative decoding through the server: a real draft model (SmolLM2 drafting for
itself), per-request speculative.* fields, the draft counts in timings, --spec-type and
synthetic acceptance (llama-server's --spec-synth-rates, for benchmarking)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=120)  # generous: the machine may be busy with other tests

PROMPT = "I believe the meaning of life is"
DRAFT = ("--spec-type", "draft-simple")
GREEDY = {"prompt": PROMPT, "n_predict": 24, "temperature": 0, "return_tokens": True}


@pytest.fixture(scope="module")
def drafting(smollm_path: str) -> Iterator[str]:
    args = ("-m", smollm_path, "-md", smollm_path, "--spec-type", "draft-simple")
    with running_server(*args, "-t", "2", "-c", "2048", "-np", "2", "--spec-draft-n-max", "4") as u:
        yield u


@pytest.mark.flag_effect("--model-draft", "--spec-draft-n-max")
def test_a_draft_model_keeps_the_output_and_reports_its_counts(drafting):
    plain = http.post(drafting + "/completion", json={**GREEDY, "speculative.n_max": 0}).json()
    assert "draft_n" not in plain["timings"]  # nothing drafted for this request
    drafted = http.post(drafting + "/completion", json=GREEDY).json()
    assert drafted["tokens"] == plain["tokens"]
    t = drafted["timings"]
    # the model drafting for itself agrees with itself almost always
    assert t["draft_n"] > 0 and 0 < t["draft_n_accepted"] <= t["draft_n"]
    settings = drafted["generation_settings"]
    assert settings["speculative.n_max"] == 4
    # p_min 1.0: no draft is ever confident enough, so nothing is drafted
    strict = {**GREEDY, "speculative.p_min": 1.0}
    r = http.post(drafting + "/completion", json=strict).json()
    assert r["tokens"] == plain["tokens"] and "draft_n" not in r["timings"]
    assert r["generation_settings"]["speculative.p_min"] == 1.0
    bad = http.post(drafting + "/completion", json={**GREEDY, "speculative.p_min": 2})
    assert bad.status_code == 400 and "speculative.p_min" in bad.json()["error"]["message"]


def test_synthetic_acceptance(smollm_path):
    args = ("-m", smollm_path, "-md", smollm_path, "--spec-type", "draft-simple", "-t", "2")
    args = (*args, "-c", "2048", "-np", "1")
    rates = ("--spec-draft-n-max", "4", "--spec-synth-rates", "1,1,1,1")
    with running_server(*args, *rates) as url:
        r = http.post(url + "/completion", json={**GREEDY, "seed": 1}).json()
        t = r["timings"]
        assert t["draft_n"] > 0 and t["draft_n_accepted"] == t["draft_n"]
        # drafted ends of generation are never forced: ignore_eos runs to the limit
        body = {"prompt": "Respond with only: OK", "n_predict": 40, "ignore_eos": True}
        r = http.post(url + "/completion", json={**body, "temperature": 0}).json()
        assert r["tokens_predicted"] == 40 and r["stop_type"] == "limit"
    half = ("--spec-draft-n-max", "4", "--spec-synth-rates", "0.75,0.5,0.25,0.1")
    with running_server(*args, *half) as url:
        body = {"prompt": PROMPT, "n_predict": 32, "temperature": 0.2, "top_k": 5, "seed": 4242}
        a, b = (http.post(url + "/completion", json=body).json()["timings"] for _ in range(2))
        assert a["draft_n"] > 0
        # the acceptance draws are seeded by the request's seed
        assert (a["draft_n"], a["draft_n_accepted"]) == (b["draft_n"], b["draft_n_accepted"])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--spec-type", "draft-mtp"], "no multi-token-prediction drafting"),
        (["-md", "x.gguf", "--spec-type", "draft-eagle3"], "only with a plain draft model"),
        (["--spec-ngram-mod-n-match", "0"], "ngram size N must be between 1 and 1024"),
        (["--spec-ngram-simple-min-hits", "0"], "ngram min hits must be at least 1"),
        (["--spec-type", "ngram-cache", "-lcs", "no-such.bin"], "--lookup-cache-static"),
        (["--spec-type", "ngram-mod", "--spec-synth-rates", "0.5"], "64 values"),
        (["--spec-type", "draft-fancy"], "unknown speculative type"),
        (["--spec-type", "draft-simple"], "needs a draft model"),
        (
            ["-md", "x.gguf", *DRAFT, "--spec-draft-n-max", "3", "--spec-synth-rates", "1,1"],
            "3 values",
        ),
        (["-md", "x.gguf", *DRAFT, "--spec-synth-rates", "0.5,0.9,0.1"], "non-increasing"),
        (["-md", "x.gguf", *DRAFT, "--spec-synth-len", "9"], "within [1, 4]"),
        # -md alone drafts nothing (llama-server's default type is none): nothing to accept
        (["-md", "x.gguf", "--spec-synth-len", "2"], "at least one speculative token"),
    ],
)
def test_bad_speculative_flags_exit_2(flags, message):
    r = subprocess.run(
        [sys.executable, "-m", "pyllama.server", "-m", "x.gguf", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tempfile.gettempdir(),  # not the repository root, whose source tree has no _core
    )
    assert r.returncode == 2 and message in r.stderr


@pytest.mark.flag_effect("--spec-type")
@pytest.mark.parametrize("kind", ["draft-eagle3", "draft-dflash", "draft-dspark"])
def test_draft_head_types_without_a_draft_model_add_nothing(smollm_path, kind):
    """As llama-server: the type is taken, and with no draft model nothing drafts."""
    args = ("-m", smollm_path, "-c", "512", "--spec-type", kind)
    body = {"prompt": PROMPT, "n_predict": 16, "temperature": 0}
    with running_server(*args) as ours, running_peer(*args) as peer:
        a, b = (http.post(u + "/completion", json=body).json() for u in (ours, peer))
        assert a["content"] == b["content"]
        assert a["timings"].get("draft_n", 0) == b["timings"].get("draft_n", 0) == 0


@pytest.mark.flag_effect("--spec-draft-p-split")
def test_p_split_changes_what_it_changes_in_llama_server_nothing(smollm_path):
    """llama-server stores --spec-draft-p-split (common.h's p_split) and reads it nowhere in
    the pinned tree; pyllama takes it the same way: two values, the same drafts and tokens
    on both servers."""
    body = {"prompt": PROMPT, "n_predict": 24, "temperature": 0, "return_tokens": True}
    seen = []
    for split in ("0.1", "0.9"):
        args = ("-m", smollm_path, "-md", smollm_path, *DRAFT, "--spec-draft-p-split", split)
        with running_server(*args) as ours, running_peer(*args) as peer:
            for url in (ours, peer):
                r = http.post(url + "/completion", json=body).json()
                t = r["timings"]
                seen.append((r["content"], t["draft_n"], t["draft_n_accepted"]))
    assert seen[0][1] > 0 and len(set(seen)) == 1, seen


@pytest.mark.flag_effect("--model-draft", "--spec-type")
def test_a_draft_model_alone_drafts_nothing_as_in_llama_server(smollm_path):
    """The pinned llama-server's --spec-type defaults to none: -md loads a draft model that
    drafts only once draft-simple is named."""
    body = {"prompt": PROMPT, "n_predict": 16, "temperature": 0}
    for extra, drafts in (((), False), (DRAFT, True)):
        args = ("-m", smollm_path, "-md", smollm_path, "-c", "1024", *extra)
        with running_server(*args) as ours, running_peer(*args) as peer:
            for url in (ours, peer):
                t = http.post(url + "/completion", json=body).json()["timings"]
                assert (t.get("draft_n", 0) > 0) == drafts
