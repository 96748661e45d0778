"""Shared prompt prefixes across tasks (csrc/engine/shared_prefix.cpp): a prefix another
slot holds or is evaluating is copied, not evaluated again, and the answers do not change."""

from __future__ import annotations

import asyncio

import pytest

from pyllama import _core
from pyllama.engine import AsyncEngine, generate, make_task, open_engine
from pyllama.sampling import make_sampling_params

SYSTEM = (
    "You are the assistant of a small bakery by the harbour. Answer in one short sentence, "
    "politely, in English. The bakery opens at seven, closes at six, sells bread, cakes and "
    "pastries, delivers within the town, and has a car park behind the shop. "
) * 8
QUESTIONS = ["What time do you open?", "Do you sell bread?", "Is there parking?", "Do you deliver?"]


def prompt(question: str) -> str:
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


@pytest.fixture(scope="module")
def model(smollm_path):
    return _core.Model(smollm_path)


def task(model, question, **kw):
    tokens = model.tokenize(prompt(question), True, True)
    return make_task(tokens, n_predict=16, sampling=make_sampling_params(temperature=0), **kw)


def tokens_of(events):
    return [e.token for e in events if e.type == "token" and e.token >= 0]


def engine(model, **kw):
    # flash attention off: with it, ggml's summation order follows the KV layout and batch
    # shapes, so even unshared concurrent answers can differ from lone ones in the last bits
    return open_engine(model, n_parallel=4, n_ctx=4 * 2048, n_threads=2, flash_attn=0, **kw)


# Nats between the two best tokens under which the pick may go either way. How a batch is laid
# out (which tokens share a ubatch, how long the attention rows are) changes the rounding of
# some kernels: with the AVX-512 ones a wave that shares the prefix picked the runner-up at a
# step whose two best were 0.022 and 0.013 nats apart (zen4 variant, 2026-11-26), while the AVX2 ones gave
# the lone answers exactly. A prefix copied wrong breaks the answer at confident steps too.
NEAR_TIE = 0.05


class Answer(list):
    """A lone answer's greedy tokens, with the margin of each step's pick over the runner-up."""

    margins: list[float]

    def __eq__(self, got: object) -> bool:
        """``got`` is this answer, or follows it to a near tie and goes on from there."""
        if not isinstance(got, list):
            return NotImplemented
        for i, (a, b) in enumerate(zip(got, self, strict=False)):
            if a != b:
                return self.margins[i] < NEAR_TIE
        return len(got) == len(self)

    def __ne__(self, got: object) -> bool:
        same = self.__eq__(got)
        return same if same is NotImplemented else not same

    __hash__ = None  # type: ignore[assignment]


def answer_alone(eng, model, question) -> Answer:
    events = generate(eng, task(model, question, cache_prompt=False, n_probs=2))
    picked = [e for e in events if e.type == "token" and e.token >= 0]
    answer = Answer(e.token for e in picked)
    answer.margins = [e.top[0][1] - e.top[1][1] for e in picked]
    return answer


@pytest.fixture(scope="module")
def alone(model):
    """Each question's greedy answer, evaluated alone from a clean cache."""
    eng = engine(model)
    try:
        return [answer_alone(eng, model, q) for q in QUESTIONS]
    finally:
        eng.stop()


def test_answers_match_up_to_a_near_tie_only():
    ref = Answer([1, 2, 3, 4])
    ref.margins = [2.0, 0.01, 1.0, 1.0]
    lone = [ref]  # as the tests compare: lists of answers, the lone ones on the right
    same, near_tie, confident, first, short = [1, 2, 3, 4], [1, 9, 9, 9], [1, 2, 3, 9], [9], [1]
    assert [same] == lone
    assert [near_tie] == lone  # the runner-up at a near tie, then its own way
    assert [confident] != lone  # a confident step changed
    assert [first + same[1:]] != lone
    assert [short + same[1:3]] != lone  # one token fewer


def wave(model, eng) -> list:
    """Every question at once; each one's (events, final event)."""
    ae = AsyncEngine(eng)

    async def run():
        return await asyncio.gather(*[ae.complete(task(model, q)) for q in QUESTIONS])

    return asyncio.run(run())


def prefix_len(model) -> int:
    a, b = (model.tokenize(prompt(q), True, True) for q in QUESTIONS[:2])
    return next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)


def test_a_wave_evaluates_the_prefix_once_with_the_same_answers(model, alone):
    eng = engine(model)
    try:
        results = wave(model, eng)
        assert [tokens_of(toks) for toks, _ in results] == alone
        shared = sorted(final.n_shared for _, final in results)
        n = prefix_len(model)
        assert shared[0] == 0  # one slot evaluated it ...
        assert all(s >= n - 1 for s in shared[1:])  # ... the others copied it
        for _, final in results:
            assert final.n_cached == final.n_shared  # nothing else was cached: a fresh engine
        m = eng.metrics()
        assert m["n_prompt_shared_total"] == sum(shared)
        total = sum(len(model.tokenize(prompt(q), True, True)) for q in QUESTIONS)
        assert m["n_prompt_tokens_total"] == total - sum(shared)
    finally:
        eng.stop()


@pytest.mark.parametrize("kv_unified", [False, True])
def test_copied_from_an_idle_slot(model, alone, kv_unified):
    """A task taking a slot whose own cache lacks the prefix copies it from an idle slot
    that has it (with per-slot KV streams the whole stream is copied, then cut)."""
    eng = engine(model, kv_unified=kv_unified)
    try:
        first = tokens_of(generate(eng, task(model, QUESTIONS[0], id_slot=0)))
        events = list(generate(eng, task(model, QUESTIONS[1], id_slot=1)))
        final = events[-1]
        assert final.n_shared >= prefix_len(model) - 1
        if not kv_unified:  # the unified cache lays the copy out elsewhere: same tokens, not bits
            assert [first, tokens_of(events)] == alone[:2]
        else:
            assert tokens_of(events)
    finally:
        eng.stop()


def test_waiting_tasks_go_on_when_the_evaluating_task_is_cancelled(model, alone):
    """Two tasks wait for a third's prefix; it is cancelled before it gets there: the first
    set free takes what the cancelled one had evaluated (if any) and evaluates the rest, the
    other waits for it; both answer as alone."""
    eng = engine(model, n_batch=256, n_ubatch=256)  # the prefix takes several steps
    try:
        ids = eng.submit_many([task(model, q) for q in QUESTIONS[:3]])
        eng.cancel(ids[0])
        finals = {}
        outs = {}
        for i in ids[1:]:
            evs = []
            while not (evs and evs[-1].done):
                evs += eng.wait(i, 60_000)
            outs[i], finals[i] = tokens_of(evs), evs[-1]
        assert [outs[i] for i in ids[1:]] == alone[1:3]
        # one of them copied the whole prefix from the other
        assert max(f.n_shared for f in finals.values()) >= prefix_len(model) - 1
    finally:
        eng.stop()


def test_off_evaluates_every_prefix(model, alone):
    eng = engine(model, share_prefix=False)
    try:
        results = wave(model, eng)
        assert [tokens_of(toks) for toks, _ in results] == alone
        assert all(final.n_shared == 0 for _, final in results)
        assert eng.metrics()["n_prompt_shared_total"] == 0
    finally:
        eng.stop()
