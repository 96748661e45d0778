"""The engine's per-sequence sampling shortcuts pick what the whole sampler chain picks.

A chain whose first acting stage is top_k gets its k candidates straight from the logits
(one vectorised pass, the logit bias applied sparsely) and runs only the stages after it;
plain greedy takes a vectorised argmax of the biased logits. The comparison side runs the
whole chain over every candidate: a zero-probability XTC stage ahead of top_k changes no
candidate and draws no random number (llama.cpp returns before it), but it does stop the
engine from taking the shortcut, which only skips stages that leave the candidates as
they are. The same seed must give the same tokens, with and without a logit bias."""

from __future__ import annotations

import asyncio

import pytest

from pyllama import _core
from pyllama.engine import AsyncEngine, generate, make_task, open_engine
from pyllama.sampling import make_sampling_params

PROMPT = (
    "<|im_start|>user\nWrite a short story about a lighthouse.<|im_end|>\n<|im_start|>assistant\n"
)
SHORTCUT = ["penalties", "top_k", "top_p", "min_p", "temperature"]
WHOLE = ["xtc", *SHORTCUT]


@pytest.fixture(scope="module")
def engine(smollm_path):
    model = _core.Model(smollm_path)
    eng = open_engine(model, n_parallel=1, n_ctx=1024, n_threads=2)
    yield model, eng
    eng.stop()


def tokens(model, eng, samplers: list[str], **sampling) -> list[int]:
    params = make_sampling_params(samplers=samplers, xtc_probability=0.0, **sampling)
    task = make_task(
        model.tokenize(PROMPT, True, True), n_predict=40, sampling=params, cache_prompt=False
    )
    return [e.token for e in generate(eng, task) if e.type == "token" and e.token >= 0]


@pytest.mark.parametrize("seed", [1, 1234])
@pytest.mark.parametrize("top_k", [1, 40, 128])
def test_top_k_shortcut_samples_as_the_whole_chain(engine, seed: int, top_k: int) -> None:
    model, eng = engine
    kw = dict(temperature=1.3, top_k=top_k, top_p=0.98, min_p=0.0, seed=seed)
    fast = tokens(model, eng, SHORTCUT, **kw)
    assert len(fast) > 20
    assert fast == tokens(model, eng, WHOLE, **kw)


def test_top_k_shortcut_applies_the_logit_bias(engine) -> None:
    model, eng = engine
    # the three tokens the unbiased run starts with are pushed out, others pulled in
    first = tokens(model, eng, SHORTCUT, temperature=1.0, top_k=20, seed=3)[:3]
    bias = {t: -100.0 for t in first} | {model.tokenize(" ocean", False, False)[0]: 6.0}
    kw = dict(temperature=1.0, top_k=20, seed=3, logit_bias=bias, ignore_eos=True)
    fast = tokens(model, eng, SHORTCUT, **kw)
    assert not set(first) & set(fast)
    assert fast == tokens(model, eng, WHOLE, **kw)


def test_greedy_argmax_with_a_sparse_bias(engine) -> None:
    model, eng = engine
    plain = tokens(model, eng, SHORTCUT, temperature=0.0)
    # a bias on the greedy pick moves it; ignore_eos keeps end tokens out
    bias = {plain[0]: -50.0, plain[1]: 3.0}
    greedy = tokens(model, eng, SHORTCUT, temperature=0.0, logit_bias=bias, ignore_eos=True)
    # top_k 1 at temperature 1 is greedy through the whole chain (every stage runs)
    whole = tokens(model, eng, WHOLE, temperature=1.0, top_k=1, logit_bias=bias, ignore_eos=True)
    assert greedy[0] != plain[0]
    assert greedy == whole


def test_scans_spread_over_threads_sample_as_one_sequence_alone(smollm_path) -> None:
    """With many sequences the engine scans their rows ahead, on ggml's threads: twelve
    seeded top-k tasks and four greedy ones (two with the raw logits' n_probs) decoded
    together give each one's tokens and probabilities alone (from clean KV, batching changes
    no logits)."""
    model = _core.Model(smollm_path)
    eng = open_engine(model, n_parallel=16, n_ctx=16 * 256, n_threads=2)
    try:

        def task(i: int):
            params = make_sampling_params(
                samplers=SHORTCUT, temperature=0.0 if i >= 12 else 1.2, top_k=30, seed=100 + i
            )
            prompt = model.tokenize(f"{PROMPT}Chapter {i}:", True, True)
            n_probs = 5 if i >= 14 else 0
            return make_task(
                prompt, n_predict=40, sampling=params, cache_prompt=False, n_probs=n_probs
            )

        def seen(events) -> list:
            return [(e.token, e.logprob, e.top) for e in events if e.type == "token"]

        alone = [seen(generate(eng, task(i))) for i in range(16)]
        assert all(len(top) == 5 for _, _, top in alone[15])
        ae = AsyncEngine(eng)

        async def together():
            runs = await asyncio.gather(
                *[ae.collect(s) for s in ae.submit_many([task(i) for i in range(16)])]
            )
            return [seen(events) for events, _ in runs]

        before = eng.metrics()["n_decode_total"]
        assert asyncio.run(together()) == alone
        assert eng.metrics()["n_decode_total"] - before < 100  # together: not 16 x 40 decodes
    finally:
        eng.stop()
