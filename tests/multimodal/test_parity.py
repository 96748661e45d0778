"""Greedy parity with llama-server built from the same vendor tree (ci/build_peer.sh): the
same tiny model and projectors, the same requests, byte-identical replies. It proves the
media plumbing (markers, tokenization, encoding, decoding positions, non-causal image
attention) matches llama.cpp's own server. Without the peer binary the test says so in
its skip reason; PYLLAMA_REQUIRE_PEER=1 makes its absence an error."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from helpers.media import b64, data_url, png, wav
from helpers.peer import require_peer, running_peer
from helpers.servers import running_server

FLAGS = ["-c", "2048", "-np", "1", "-t", "2", "--temp", "0"]


@pytest.fixture(scope="module")
def peer_bin() -> Path:
    return require_peer()


REQUESTS = [
    [
        {"type": "text", "text": "Describe this."},
        {"type": "image_url", "image_url": {"url": data_url(png(64, 64, seed=0))}},
    ],
    [
        {"type": "image_url", "image_url": {"url": data_url(png(97, 41, seed=1))}},
        {"type": "text", "text": "What is it?"},
    ],
    [
        {"type": "text", "text": "Compare"},
        {"type": "image_url", "image_url": {"url": data_url(png(32, 32, seed=2))}},
        {"type": "text", "text": "with"},
        {"type": "image_url", "image_url": {"url": data_url(png(200, 120, seed=3))}},
    ],
    [
        {"type": "text", "text": "Listen."},
        {"type": "input_audio", "input_audio": {"data": b64(wav(1.5)), "format": "wav"}},
    ],
]


def _replies(url: str) -> list[tuple[str, int]]:
    out = []
    for parts in REQUESTS:
        body = {
            "messages": [{"role": "user", "content": parts}],
            "max_tokens": 24,
            "temperature": 0,
        }
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        d = r.json()
        out.append((d["choices"][0]["message"]["content"], d["usage"]["prompt_tokens"]))
    marker = httpx.get(url + "/props").json()["media_marker"]  # random per server process
    prompt = {
        "prompt_string": f"Picture: {marker} says",
        "multimodal_data": [b64(png(50, 50, seed=4))],
    }
    r = httpx.post(
        url + "/completion", json={"prompt": prompt, "n_predict": 16, "temperature": 0}, timeout=120
    )
    assert r.status_code == 200, r.text
    out.append((r.json()["content"], r.json()["tokens_evaluated"]))
    return out


def test_greedy_replies_equal_llama_server(peer_bin: Path, tiny_vlm: dict[str, Path]) -> None:
    args = ["-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj_omni"]), *FLAGS]
    with running_server(*args) as url:
        ours = _replies(url)
    with running_peer(*args) as url:
        theirs = _replies(url)
    assert ours == theirs
