"""Batched image encoding, as llama-server's: the images of one prompt go through the encoder
together, up to ``--mtmd-batch-max-tokens`` image tokens a run, and each is decoded from the
batch when the prompt reaches it (text between them included). libmtmd logs each encoder run
at debug level ("encoding batch with N entries and total T tokens"); with ``-v`` both servers
write that line to ``--log-file``, so the runs can be counted and compared with the peer's.
The projector is tiny_internvl's: gemma3's encoder takes one image at a time whatever the
option says. Without the peer binary the test says so in its skip reason."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from fixtures.tiny_internvl import IMAGE_TOKENS, write_internvl_projector
from helpers.media import data_url, png
from helpers.peer import require_peer, running_peer
from helpers.servers import running_server

FLAGS = ["-c", "2048", "-np", "1", "-t", "2", "--temp", "0", "-v"]
RUNS = re.compile(r"encoding batch with (\d+) entries and total (\d+) tokens")
N_IMAGES = 3

Start = Callable[..., AbstractContextManager[str]]


@pytest.fixture(scope="module")
def internvl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_internvl_projector(tmp_path_factory.mktemp("internvl") / "mmproj-internvl.gguf")


def _ask(url: str) -> str:
    parts: list[dict] = [{"type": "text", "text": "Compare"}]
    for i in range(N_IMAGES):  # same size: one grid, so mtmd may batch them
        parts.append(
            {"type": "image_url", "image_url": {"url": data_url(png(64, 64, seed=10 + i))}}
        )
        parts.append({"type": "text", "text": f"and {i}"})
    body = {"messages": [{"role": "user", "content": parts}], "max_tokens": 24, "temperature": 0}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def _run(start: Start, args: list[str], log: Path) -> tuple[str, list[tuple[int, int]]]:
    """The greedy reply and the encoder runs (images, tokens) the server logged for it."""
    with start(*args, "--log-file", str(log)) as url:
        text = _ask(url)
    runs = RUNS.findall(log.read_text(errors="replace"))
    return text, [(int(n), int(t)) for n, t in runs]


@pytest.mark.flag_effect("--mtmd-batch-max-tokens")
def test_batch_max_tokens_groups_the_encoder_runs_as_llama_server(
    tiny_vlm: dict[str, Path], internvl: Path, tmp_path: Path
) -> None:
    require_peer()
    base = ["-m", str(tiny_vlm["model"]), "--mmproj", str(internvl), *FLAGS]
    one = IMAGE_TOKENS
    cases = {
        1024: [(3, 3 * one)],  # the default: every image in one run
        2 * one: [(2, 2 * one), (1, one)],  # a second batch once the first is used up
        one: [(1, one)] * N_IMAGES,  # one image a run
    }
    texts = set()
    for limit, expected in cases.items():
        args = [*base, "--mtmd-batch-max-tokens", str(limit)]
        ours = _run(running_server, args, tmp_path / f"ours-{limit}.log")
        theirs = _run(running_peer, args, tmp_path / f"peer-{limit}.log")
        assert ours[1] == expected, limit
        assert ours == theirs, limit
        texts.add(ours[0])
    assert all(texts), texts
