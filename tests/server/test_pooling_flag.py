"""--pooling picks how /v1/embeddings pools the token vectors: mean and last give different
vectors, and each is llama-server's for the same command line."""

from __future__ import annotations

import math

import httpx
import pytest

from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy


def embedding(cmd: list[str]) -> list[float]:
    proc, url = start_process(cmd)
    try:
        wait_healthy(url, proc)
        body = {"input": "The capital of France is Paris.", "model": "x"}
        r = httpx.post(url + "/v1/embeddings", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["data"][0]["embedding"]
    finally:
        stop_process(proc)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


@pytest.mark.flag_effect("--pooling")
def test_pooling_is_llama_servers(smollm_path: str) -> None:
    common = ["-m", smollm_path, "-c", "512", "-t", "2", "--no-warmup", "--embedding"]
    mean = embedding([*PYLLAMA_SERVER, *common, "--pooling", "mean"])
    last = embedding([*PYLLAMA_SERVER, *common, "--pooling", "last"])
    theirs = embedding([str(require_peer()), *common, "--pooling", "last", "--no-webui"])
    assert _cosine(last, theirs) > 0.999
    assert _cosine(mean, last) < 0.99
