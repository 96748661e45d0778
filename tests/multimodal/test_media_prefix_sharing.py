"""Shared prompt prefixes that hold an image (csrc/engine/shared_prefix.cpp): tasks that
send the same image and text before their own question copy its KV from the slot that
evaluated it, and answer as they would alone; a different image stops the sharing at its
start."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyllama import _core

from fixtures.tiny_vlm import IMAGE_TOKENS
from helpers.media import png

CONTEXT = "Here is a photo of the bakery's window, with the day's cakes and prices. " * 4
QUESTIONS = ["Which cake is the cheapest?", "Is there bread?", "What colour is the door?"]


@pytest.fixture(scope="module")
def model(tiny_vlm: dict[str, Path]) -> _core.Model:
    return _core.Model(str(tiny_vlm["model"]))


@pytest.fixture(scope="module")
def vision(model: _core.Model, tiny_vlm: dict[str, Path]) -> _core.Projector:
    return _core.Projector(model, str(tiny_vlm["mmproj"]), n_threads=2)


def engine(model: _core.Model, vision: _core.Projector, **kw) -> _core.Engine:
    # flash attention off: the same KV then gives the same bits whatever the batch shape
    return _core.Engine(
        model, n_ctx=4 * 1024, n_parallel=4, n_threads=2, projector=vision, flash_attn=0, **kw
    )


def task(prompt: _core.MediaPrompt, cache: bool = True) -> _core.TaskParams:
    t = _core.TaskParams()
    t.set_prompt(prompt)
    t.n_predict = 8
    t.cache_prompt = cache
    greedy = _core.SamplingParams()
    greedy.temperature = 0.0
    t.sampling = greedy
    return t


def run(eng: _core.Engine, prompts: list[_core.MediaPrompt]) -> list[tuple[list[int], int]]:
    """Submitted together; each task's tokens and how many prompt tokens it shared."""
    ids = eng.submit_many([task(p) for p in prompts])
    out = []
    for tid in ids:
        evs: list = []
        while not (evs and evs[-1].done):
            evs += eng.wait(tid, 60_000)
        assert all(e.type != "error" for e in evs), [e.message for e in evs]
        out.append(([e.token for e in evs if e.type == "token"], evs[-1].n_shared))
    return out


def alone(model, vision, prompts) -> list[list[int]]:
    eng = engine(model, vision, share_prefix=False)
    try:
        return [run(eng, [p])[0][0] for p in prompts]
    finally:
        eng.stop()


def test_a_shared_image_is_evaluated_once(model, vision):
    image = png(48, 48, seed=3)
    prompts = [vision.tokenize(f"<__media__> {CONTEXT}{q}", [image]) for q in QUESTIONS]
    want = alone(model, vision, prompts)
    eng = engine(model, vision)
    try:
        got = run(eng, prompts)
        assert [toks for toks, _ in got] == want
        shared = sorted(n for _, n in got)
        assert shared[0] == 0  # one slot evaluated the image and the context ...
        assert all(n >= IMAGE_TOKENS + 32 for n in shared[1:])  # ... the others copied both
        assert eng.metrics()["n_prompt_shared_total"] == sum(shared)
    finally:
        eng.stop()


def test_a_different_image_stops_the_sharing_at_its_start(model, vision):
    prompts = [
        vision.tokenize(f"{CONTEXT}<__media__> {q}", [png(48, 48, seed=10 + i)])
        for i, q in enumerate(QUESTIONS)
    ]
    before = prompts[0].media[0].start
    want = alone(model, vision, prompts)
    eng = engine(model, vision)
    try:
        got = run(eng, prompts)
        assert [toks for toks, _ in got] == want
        assert max(n for _, n in got) == before  # the text before the images, no more
    finally:
        eng.stop()
