"""An embedding server with -np N: one KV cache shared by the slots (pooled inputs stay whole
in a ubatch), each slot limited to n_ctx / N as llama-server's separate caches are."""

from __future__ import annotations

import httpx
import pytest

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
