"""Prompt-cache and slot options act as llama-server's: ``--cache-idle-slots``,
``--cache-reuse``, ``--slot-prompt-similarity`` (the cached counts of the same requests,
with and without the flag, equal the peer's started the same way) and ``--log-prompts-dir``
(the files written)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

KNIGHT = "Once upon a time in a land far away, there lived a brave knight."
HORSE = " He had a red horse named Blaze and a silver shield."
RIVER = (
    " Every morning he rode to the river to watch the fish jump, and every evening he sang"
    " songs about dragons and kings to the village children."
)
RUNNERS: list[tuple[str, Callable]] = [("ours", running_server), ("peer", running_peer)]


def _cached(url: str, prompt: str, **extra: object) -> int:
    body = {"prompt": prompt, "n_predict": 2, "temperature": 0, "cache_prompt": True, **extra}
    r = httpx.post(url + "/completion", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["timings"]["cache_n"]


def _both(args: list[str], requests: Callable[[str], list[int]]) -> list[int]:
    """The cached counts ``requests`` gets from pyllama-server and from the peer (equal)."""
    counts = []
    for _, runner in RUNNERS:
        with runner(*args) as url:
            counts.append(requests(url))
    assert counts[0] == counts[1], counts
    return counts[0]


def _args(smollm_path: str, *extra: str) -> list[str]:
    return ["-m", smollm_path, "-t", "2", "-c", "1024", *extra]


@pytest.mark.parametrize(
    ("flags", "restored"),
    [
        ([], True),
        pytest.param(
            ["--no-cache-idle-slots"], False, marks=pytest.mark.flag_effect("--no-cache-idle-slots")
        ),
    ],
)
def test_idle_slots_are_saved_to_ram_as_llama_server(smollm_path, flags, restored) -> None:
    # with a unified KV cache, a new task saves the idle slot 0 to RAM and clears it; slot 1
    # can then restore the prompt from RAM. Not saved: slot 1 has nowhere to get it from
    # (pyllama's cross-slot copy is off, llama-server has none).
    args = _args(smollm_path, "-np", "2", "-kvu", "--cache-ram", "100")
    prompt = KNIGHT + HORSE + RIVER

    def requests(url: str) -> list[int]:
        return [
            _cached(url, prompt, id_slot=0),
            _cached(url, "The quick brown fox", id_slot=1),
            _cached(url, prompt, id_slot=1),
        ]

    counts = []
    for name, runner in RUNNERS:
        with runner(*args, *flags, *(["--no-prefix-share"] if name == "ours" else [])) as url:
            counts.append(requests(url))
    assert counts[0] == counts[1]
    assert counts[0][2] == (56 if restored else 0)


@pytest.mark.parametrize(
    ("flags", "second"),
    [
        ([], 16),
        pytest.param(["--cache-reuse", "8"], 43, marks=pytest.mark.flag_effect("--cache-reuse")),
    ],
)
def test_cache_reuse_shifts_a_chunk_as_llama_server(smollm_path, flags, second) -> None:
    # the middle sentence goes: only the prefix is cached, unless the tail chunk is shifted
    def requests(url: str) -> list[int]:
        return [_cached(url, KNIGHT + HORSE + RIVER), _cached(url, KNIGHT + RIVER)]

    assert _both(_args(smollm_path, "-np", "1", *flags), requests) == [0, second]


@pytest.mark.parametrize(
    ("flags", "counts"),
    [
        ([], [0, 28, 29]),  # similar enough: the same slot, the long prompt is overwritten
        # off: the least recently used slot, so the long prompt stays in the first one
        pytest.param(["-sps", "0.0"], [0, 0, 56], marks=pytest.mark.flag_effect("-sps")),
    ],
)
def test_slot_prompt_similarity_picks_the_slot_as_llama_server(smollm_path, flags, counts) -> None:
    def requests(url: str) -> list[int]:
        long = KNIGHT + HORSE + RIVER
        return [_cached(url, p) for p in (long, KNIGHT + HORSE, long)]

    assert _both(_args(smollm_path, "-np", "2", *flags), requests) == counts


@pytest.mark.flag_effect("--log-prompts-dir")
def test_log_prompts_dir_gets_each_prompt_as_llama_server(smollm_path, tmp_path: Path) -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    texts = []
    for name, runner in RUNNERS:
        folder = tmp_path / name / "prompts"
        with runner(*_args(smollm_path, "--log-prompts-dir", str(folder))) as url:
            assert folder.is_dir()  # made at start
            assert _cached(url, "Hello there") == 0
            time.sleep(0.01)  # the peer names its files by the millisecond
            assert httpx.post(url + "/v1/chat/completions", json=chat).status_code == 200
        texts.append(sorted(p.read_text() for p in folder.iterdir()))
    assert texts[0] == texts[1]
    chat_prompt, completion_prompt = texts[0]  # sorted: "<|im_start|>..." first
    assert completion_prompt == "Hello there"
    assert chat_prompt.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
