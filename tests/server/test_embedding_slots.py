"""An embedding server with -np N: one KV cache shared by the slots (pooled inputs stay whole
in a ubatch), each slot limited to n_ctx / N as llama-server's separate caches are."""

from __future__ import annotations

import subprocess
import sys
import tempfile

import httpx
import pytest

from pyllama import _core

from helpers.peer import running_peer
from helpers.servers import running_server


@pytest.mark.flag_effect("-np")
def test_a_slot_holds_what_llama_servers_does(smollm_path: str) -> None:
    args = ("-m", smollm_path, "--embeddings", "-c", "2048", "-np", "4")
    with running_server(*args) as ours, running_peer(*args) as peer:
        got = [
            httpx.get(u + "/props", timeout=30).json()["default_generation_settings"]["n_ctx"]
            for u in (ours, peer)
        ]
        assert got == [512, 512]
        too_long = {"input": "word " * 700}  # ~700 tokens: over a slot, under the whole cache
        codes = [
            httpx.post(u + "/v1/embeddings", json=too_long, timeout=60).status_code
            for u in (ours, peer)
        ]
        assert codes[0] == codes[1] and codes[0] >= 400


def test_long_inputs_to_an_encoder_fill_a_ubatch_at_most(minilm_path: str) -> None:
    """An encoder decodes each batch in one ubatch: with the default -b 2048 -ub 512, four
    slots of ~300-token inputs must not go into one decode (llama.cpp aborts the process);
    the batch is kept to a ubatch as llama-server keeps it, and every input is answered."""
    text = " ".join(f"word{i}" for i in range(120))
    inputs = [f"{i} {text}" for i in range(6)]
    with running_server("-m", minilm_path, "--embedding", "-t", "2") as url:
        r = httpx.post(url + "/v1/embeddings", json={"input": inputs}, timeout=300)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["usage"]["prompt_tokens"] > 6 * 256  # each input over half a ubatch
        batched = [d["embedding"] for d in body["data"]]
        alone = httpx.post(url + "/v1/embeddings", json={"input": inputs[3]}, timeout=300)
        assert alone.status_code == 200, alone.text
        assert batched[3] == pytest.approx(alone.json()["data"][0]["embedding"], abs=1e-4)
        assert httpx.get(url + "/health", timeout=30).status_code == 200


def test_an_encoder_decodes_many_short_inputs_at_once(minilm_path: str) -> None:
    """-np's auto value for an encoder is ENCODER_SLOTS, not llama-server's 4: it keeps no
    KV cache, so 32 short texts of one request go through in a few decodes, not 8 rounds of
    4. A decode takes more inputs only while it holds at most --embd-step-tokens tokens
    (auto: n_embd/2, 192 for MiniLM): its attention is dense over all its tokens."""

    def decodes(url: str) -> float:
        text = httpx.get(url + "/metrics", timeout=30).text
        line = next(x for x in text.splitlines() if x.startswith("llamacpp:n_decode_total"))
        return float(line.split()[-1])

    inputs = [f"{i}: a short sentence about the sea and the ships" for i in range(32)]
    for extra, cap in (
        ((), 192),
        (("--embd-step-tokens", "0"), 512),
        (("--embd-step-tokens", "64"), 64),
    ):
        args = ("-m", minilm_path, "--embedding", "-t", "2", "--metrics", *extra)
        with running_server(*args) as url:
            assert httpx.get(url + "/props", timeout=30).json()["total_slots"] == 32
            before = decodes(url)
            r = httpx.post(url + "/v1/embeddings", json={"input": inputs}, timeout=300)
            assert r.status_code == 200, r.text
            assert len(r.json()["data"]) == 32
            tokens = r.json()["usage"]["prompt_tokens"]
            fewest = -(-tokens // cap)  # no decode over the cap
            assert fewest <= decodes(url) - before <= fewest + 2, (extra, tokens)
    # an explicit -np is what it says
    with running_server("-m", minilm_path, "--embedding", "-t", "2", "-np", "4") as url:
        assert httpx.get(url + "/props", timeout=30).json()["total_slots"] == 4


def test_an_embedding_step_cap_below_auto_is_refused_by_name(minilm_path: str) -> None:
    """-1 is auto and 0 no cap: anything lower is an error naming the option, from the
    server's flags and from the engine's constructor alike."""
    r = subprocess.run(  # from elsewhere: the source tree has no compiled module
        [sys.executable, "-m", "pyllama.server", "-m", minilm_path, "--embd-step-tokens", "-2"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tempfile.gettempdir(),
    )
    assert r.returncode == 2
    assert "--embd-step-tokens must be >= -1" in r.stderr
    with pytest.raises(ValueError, match="embd_step_tokens must be >= -1"):
        _core.Engine(_core.Model(minilm_path), embeddings=True, embd_step_tokens=-2)
