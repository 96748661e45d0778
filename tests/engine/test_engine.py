"""The C++ engine with the real model: batching, cancellation, admission, caching, n>1,
embeddings, slot persistence, and the asyncio bridge."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from pyllama import _core
from pyllama.engine import AsyncEngine, generate, make_task, open_engine
from pyllama.sampling import make_sampling_params

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time",
    "1, 2, 3, 4,",
    "The best way to learn a language is",
    "<|im_start|>user\nName three fruits.<|im_end|>\n<|im_start|>assistant\n",
    "import numpy as np\n",
    "Water boils at",
]


@pytest.fixture(scope="module")
def model(smollm_path):
    return _core.Model(smollm_path)


def task(model, prompt, n=24, **kw):
    sampling = kw.pop("sampling", None) or make_sampling_params(temperature=0)
    return make_task(model.tokenize(prompt, True, True), n_predict=n, sampling=sampling, **kw)


def tokens_of(events):
    return [e.token for e in events if e.type == "token" and e.token >= 0]


def text_of(events):
    return b"".join(e.text for e in events if e.type == "token").decode("utf-8")


def run(coro):
    return asyncio.run(coro)


def test_eight_concurrent_equal_alone(model):
    """Batching changes nothing: each sequence's tokens are bit-for-bit those it gets alone.

    From clean KV (cache_prompt off). A reused cached prefix changes the KV layout, and
    with it ggml's flash-attention summation order, as in llama-server."""
    eng = open_engine(model, n_parallel=8, n_ctx=8 * 512, n_threads=2)
    try:
        alone = [tokens_of(generate(eng, task(model, p, cache_prompt=False))) for p in PROMPTS]
        ae = AsyncEngine(eng)

        async def together():
            res = await asyncio.gather(
                *[ae.complete(task(model, p, cache_prompt=False)) for p in PROMPTS]
            )
            return [tokens_of(toks) for toks, _ in res]

        assert run(together()) == alone
        m = eng.metrics()
        # several sequences shared decodes: more busy slots than decodes
        assert m["n_busy_slots_total"] > m["n_decode_total"]
    finally:
        eng.stop()


def test_cancel_frees_slot_at_once(model):
    eng = open_engine(model, n_parallel=1, n_ctx=2048, n_threads=2)
    ae = AsyncEngine(eng)
    try:

        async def go():
            long = make_sampling_params(temperature=0, ignore_eos=True)
            stream = ae.submit(task(model, "Tell me a long story.", n=1000, sampling=long))
            async for ev in stream:
                if ev.type == "token":
                    break
            assert eng.slots()[0]["state"] == "generating"
            t0 = time.monotonic()
            before = eng.metrics()["n_predicted_total"]
            await stream.aclose()
            while eng.slots()[0]["state"] != "idle":
                assert time.monotonic() - t0 < 60.0, "slot still busy after cancel"
                await asyncio.sleep(0.01)
            # "at once" in work, not in time (a busy machine slows both): the loop stops
            # the task at its next step, a leaked one would run on for ~1000 tokens
            assert eng.metrics()["n_predicted_total"] - before <= 16
            # the freed slot serves the next request
            _, final = await ae.complete(task(model, "Hi", n=4))
            assert final.n_predicted == 4

        run(go())
    finally:
        ae.close()


def test_new_tasks_take_adjacent_slots(model):
    # Slots 1 and 2 are used last, so least-recently-used order is 0, 3, 1, 2: two new
    # tasks must still take adjacent slots (0 and 1), since with per-sequence KV streams the
    # attention of a ubatch spans every stream between its lowest and highest sequence.
    eng = open_engine(model, n_parallel=4, n_ctx=2048, n_threads=2)
    try:
        for slot in (1, 2):
            list(generate(eng, task(model, "Hi", n=2, id_slot=slot, cache_prompt=False)))
        long = make_sampling_params(temperature=0, ignore_eos=True)
        ids = eng.submit_many(
            [task(model, p, n=400, sampling=long, cache_prompt=False) for p in PROMPTS[:2]]
        )
        t0 = time.monotonic()
        busy: list[int] = []
        while len(busy) < 2 and time.monotonic() - t0 < 10:
            busy = sorted(s["id"] for s in eng.slots() if s["task_id"] in ids)
            time.sleep(0.01)
        for i in ids:
            eng.cancel(i)
        assert busy == [0, 1]
    finally:
        eng.stop()


def test_full_queue_is_refused_and_nothing_hangs(model):  # item 32
    eng = open_engine(model, n_parallel=1, n_ctx=2048, n_threads=2, max_queue=2)
    ae = AsyncEngine(eng)
    try:

        async def go():
            long = make_sampling_params(temperature=0, ignore_eos=True)
            streams = [
                ae.submit(task(model, "Count to a thousand:", n=2000, sampling=long))
                for _ in range(3)
            ]
            with pytest.raises(_core.OverloadedError):
                ae.submit(task(model, "one too many", n=4))
            for s in streams:
                await s.aclose()
            t0 = time.monotonic()
            _, final = await ae.complete(task(model, "Hello", n=4))
            assert final.n_predicted == 4 and time.monotonic() - t0 < 10

        run(go())
    finally:
        ae.close()


def test_repeated_prompt_uses_the_cache(model):
    eng = open_engine(model, n_parallel=2, n_ctx=4096, n_threads=2)
    try:
        prompt = (
            "The history of the Roman Empire spans many centuries, from its founding to its fall."
        )
        first = list(generate(eng, task(model, prompt, n=8)))
        before = eng.metrics()["n_prompt_tokens_total"]
        second = list(generate(eng, task(model, prompt, n=8)))
        n_prompt = len(model.tokenize(prompt, True, True))
        assert first[-1].n_cached == 0
        assert second[-1].n_cached == n_prompt - 1  # all but the last token came from the cache
        assert eng.metrics()["n_prompt_tokens_total"] - before == 1
        assert tokens_of(second) == tokens_of(first)
        longer = list(generate(eng, task(model, prompt + " It began", n=4)))
        assert longer[-1].n_cached >= n_prompt - 1  # only the new suffix is evaluated
    finally:
        eng.stop()


def test_n_completions_share_the_prompt(model):
    eng = open_engine(model, n_parallel=4, n_ctx=4096, n_threads=2)
    try:
        events = list(generate(eng, task(model, "My favourite animal is", n=12, n_cmpl=3)))
        finals = [e for e in events if e.type == "final"]
        assert sorted(e.index for e in finals) == [0, 1, 2] and events[-1].done
        per = {
            i: [e.token for e in events if e.type == "token" and e.index == i and e.token >= 0]
            for i in range(3)
        }
        single = tokens_of(generate(eng, task(model, "My favourite animal is", n=12)))
        assert per[0] == per[1] == per[2] == single  # greedy: every completion is the same
        hot = make_sampling_params(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=7)
        events = list(
            generate(eng, task(model, "My favourite animal is", n=12, n_cmpl=3, sampling=hot))
        )
        texts = {
            i: b"".join(e.text for e in events if e.type == "token" and e.index == i)
            for i in range(3)
        }
        assert len(set(texts.values())) > 1  # distinct seeds per completion
    finally:
        eng.stop()


def test_batched_embeddings(model):
    eng = open_engine(model, n_parallel=4, n_ctx=4 * 512, n_threads=2, embeddings=True, pooling=1)
    ae = AsyncEngine(eng)
    texts = [
        "The cat sat on the mat.",
        "A cat is sitting on a mat.",
        "Stock markets fell sharply.",
        "Hello",
    ]
    try:

        def embed_task(t):
            p = _core.TaskParams()
            p.kind = _core.TaskKind.EMBEDDING
            p.prompt = model.tokenize(t, True, True)
            return p

        alone = [
            np.array(next(e for e in generate(eng, embed_task(t)) if e.done).embedding)
            for t in texts
        ]

        async def together():
            res = await asyncio.gather(*[ae.complete(embed_task(t)) for t in texts])
            return [np.array(final.embedding) for _, final in res]

        batched = run(together())
        for a, b in zip(alone, batched):
            assert a.shape == (model.n_embd,)
            assert abs(np.linalg.norm(b) - 1.0) < 1e-4
            np.testing.assert_allclose(a, b, atol=1e-4)
        assert batched[0] @ batched[1] > batched[0] @ batched[2]
        # a generative model with embeddings on completes too (llama-server's --embedding)
        assert eng.serves_completions and eng.serves_embeddings
        events = list(generate(eng, task(model, "Once upon a time", n=4)))
        assert sum(e.type == "token" for e in events) == 4
    finally:
        ae.close()


def test_an_embedding_request_counts_once_against_the_queue(model):
    """--max-queue bounds requests: 64 inputs of one embedding request are one (a batch of
    texts is what retrieval clients send; llama-server takes it whole). Completions still
    count one a sequence."""
    eng = open_engine(
        model, n_parallel=1, n_ctx=512, n_threads=2, embeddings=True, pooling=1, max_queue=0
    )
    ae = AsyncEngine(eng)

    def embed_task(i: int) -> _core.TaskParams:
        p = _core.TaskParams()
        p.kind = _core.TaskKind.EMBEDDING
        p.prompt = model.tokenize(f"text number {i}", True, True)
        return p

    try:

        async def go():
            streams = ae.submit_many([embed_task(i) for i in range(64)])
            finals = []
            for s in streams:
                async for ev in s:
                    if ev.done:
                        finals.append(ev)
            with pytest.raises(_core.OverloadedError):  # three completions are three
                ae.submit_many([task(model, f"completion {i}", n=4) for i in range(3)])
            return finals

        finals = run(go())
        assert len(finals) == 64 and all(len(f.embedding) == model.n_embd for f in finals)
    finally:
        ae.close()


def test_slot_save_restore_continues_identically(model, tmp_path):
    prompt = "The old lighthouse keeper looked at the sea and said"
    eng = open_engine(model, n_parallel=2, n_ctx=4096, n_threads=2)
    try:
        first = list(generate(eng, task(model, prompt, n=16, id_slot=0)))
        convo = model.tokenize(prompt, True, True) + tokens_of(first)
        path = str(tmp_path / "slot0.bin")
        assert eng.save_slot(0, path) > 0
        eng.erase_slot(0)
        assert eng.slots()[0]["n_cache"] == 0
        n = eng.restore_slot(0, path)
        assert n == eng.slots()[0]["n_cache"] > 0
        cont = make_task(
            convo, n_predict=16, sampling=make_sampling_params(temperature=0), id_slot=0
        )
        restored = list(generate(eng, cont))
        assert restored[-1].n_cached == n  # continued from the restored KV
        fresh = make_task(
            convo,
            n_predict=16,
            sampling=make_sampling_params(temperature=0),
            id_slot=1,
            cache_prompt=False,
        )
        assert tokens_of(restored) == tokens_of(generate(eng, fresh))
    finally:
        eng.stop()


def test_python_thread_runs_during_generation(model, ticker):
    eng = open_engine(model, n_parallel=1, n_ctx=2048, n_threads=2)
    long = make_sampling_params(temperature=0, ignore_eos=True)
    try:
        with ticker:
            start = time.perf_counter()
            events = list(
                generate(eng, task(model, "Write a poem about autumn.", n=64, sampling=long))
            )
            elapsed = time.perf_counter() - start
    finally:
        eng.stop()
    assert events[-1].n_predicted == 64
    assert ticker.ticks >= elapsed * 1000 * 0.2, f"{ticker.ticks} ticks in {elapsed:.2f}s"


def test_bad_tasks_fail_at_submit(model):
    eng = open_engine(model, n_parallel=2, n_ctx=2 * 256, n_threads=2)
    try:
        with pytest.raises(ValueError, match="grammar"):
            eng.submit(task(model, "x", sampling=make_sampling_params(grammar="root ::= (")))
        with pytest.raises(ValueError, match="n must be"):
            eng.submit(task(model, "x", n_cmpl=3))
        with pytest.raises(_core.ContextSizeError) as info:
            eng.submit(make_task([1] * 300, n_predict=4))
        assert info.value.n_prompt_tokens == 300 and info.value.n_ctx == 256
        with pytest.raises(IndexError):
            eng.submit(make_task([model.n_vocab + 1], n_predict=4))
        with pytest.raises(ValueError, match="empty"):
            eng.submit(make_task([], n_predict=4))
        assert tokens_of(generate(eng, task(model, "still fine", n=3)))  # and it keeps serving
    finally:
        eng.stop()


def test_stop_strings_and_length_limits(model):
    eng = open_engine(model, n_parallel=1, n_ctx=256, n_threads=2)
    try:
        full = text_of(generate(eng, task(model, "Count: 1, 2, 3,", n=20)))
        assert " 5" in full
        events = list(generate(eng, task(model, "Count: 1, 2, 3,", n=20, stop=[" 5"])))
        assert text_of(events) == full[: full.index(" 5")]
        assert events[-1].stop == "word" and events[-1].stopping_word == " 5"
        # n_predict -1 stops at the slot's context end
        events = list(
            generate(
                eng,
                task(
                    model,
                    "Repeat forever: la la la",
                    n=-1,
                    sampling=make_sampling_params(temperature=0, ignore_eos=True),
                ),
            )
        )
        assert events[-1].stop == "context"
        assert events[-1].n_prompt + events[-1].n_predicted >= 256
    finally:
        eng.stop()


def test_streamed_text_is_valid_utf8(model):
    eng = open_engine(model, n_parallel=1, n_ctx=1024, n_threads=2)
    try:
        events = list(
            generate(
                eng,
                task(
                    model,
                    "Reply with emojis only: 🦙🎉🔥",
                    n=40,
                    sampling=make_sampling_params(temperature=1.0, seed=3),
                ),
            )
        )
        pieces = [e.text for e in events if e.type == "token"]
        for p in pieces:
            p.decode("utf-8")  # strict: a split character would raise here
        assert b"".join(pieces).decode("utf-8")
    finally:
        eng.stop()


def test_probabilities(model):
    eng = open_engine(model, n_parallel=1, n_ctx=1024, n_threads=2)
    try:
        ev = [
            e
            for e in generate(eng, task(model, "The capital of France is", n=3, n_probs=5))
            if e.type == "token"
        ]
        for e in ev:
            assert len(e.top) == 5 and e.top[0][0] == e.token  # greedy: the top candidate
            assert abs(e.top[0][1] - e.logprob) < 1e-5 and e.logprob <= 0
        post = [
            e
            for e in generate(
                eng,
                task(model, "The capital of France is", n=3, n_probs=5, post_sampling_probs=True),
            )
            if e.type == "token"
        ]
        assert all(abs(e.logprob) < 1e-5 for e in post)  # temperature 0 leaves one candidate, p = 1
    finally:
        eng.stop()


def test_context_shift_keeps_generating(model):
    long = make_sampling_params(temperature=0, ignore_eos=True)
    plain = open_engine(model, n_parallel=1, n_ctx=256, n_threads=2)
    shifting = open_engine(
        model, n_parallel=1, n_ctx=256, n_threads=2, context_shift=True, n_keep=4
    )
    window = plain.n_ctx_slot
    try:
        stopped = list(generate(plain, task(model, "List animals:", n=2 * window, sampling=long)))
        assert stopped[-1].stop == "context" and stopped[-1].n_predicted < window
        shifted = list(
            generate(shifting, task(model, "List animals:", n=2 * window, sampling=long))
        )
        assert (
            shifted[-1].stop == "limit" and shifted[-1].n_predicted == 2 * window
        )  # past the window
        assert shifting.slots()[0]["n_cache"] < window
        text_of(shifted)  # still whole UTF-8
    finally:
        plain.stop()
        shifting.stop()


def test_time_limit(model):
    eng = open_engine(model, n_parallel=1, n_ctx=4096, n_threads=2)
    try:
        long = make_sampling_params(temperature=0, ignore_eos=True)
        t0 = time.monotonic()
        events = list(
            generate(eng, task(model, "Go on forever:", n=-1, sampling=long, t_max_predict_ms=300))
        )
        assert events[-1].stop == "timeout"
        assert time.monotonic() - t0 < 60 and 0 < events[-1].n_predicted < 4000  # loaded CI hosts
    finally:
        eng.stop()


def test_submit_many_shares_the_first_batch_and_is_all_or_nothing(model):
    eng = open_engine(model, n_parallel=4, n_ctx=4 * 512, n_threads=2, max_queue=0)
    ae = AsyncEngine(eng)
    try:

        async def go():
            streams = ae.submit_many([task(model, p, n=6) for p in PROMPTS[:4]])
            results = await asyncio.gather(*[ae.collect(s) for s in streams])
            return [final for _, final in results]

        finals = run(go())
        assert [f.n_predicted for f in finals] == [6] * 4
        # one decode evaluated all four prompts, then 5 steps generated the rest
        assert eng.metrics()["n_decode_total"] == 1 + 5
        with pytest.raises(_core.OverloadedError):  # 5 tasks for 4 slots and no queue
            eng.submit_many([task(model, p, n=2) for p in PROMPTS[:5]])
        assert eng.metrics()["n_deferred"] == 0  # none of the five was admitted
    finally:
        ae.close()


def test_cache_reuse_shifts_chunks_after_the_prefix(model):
    """--cache-reuse: a chunk the cache holds later on is shifted into place, not recomputed."""
    eng = open_engine(model, n_parallel=1, n_ctx=2048, n_threads=2)
    try:
        head = model.tokenize("Question one about apples.", True, True)
        old = model.tokenize(" Some filler that will be dropped from the prompt now.", False, True)
        body = model.tokenize(
            " A long shared passage about the orchards of Normandy, their cider and the"
            " farmers who tend them through every season of the year.",
            False,
            True,
        )

        def ask(tokens, reuse):
            t = make_task(tokens, n_predict=4, sampling=make_sampling_params(temperature=0))
            t.n_cache_reuse = reuse
            return list(generate(eng, t))

        ask(head + old + body, 0)
        plain = ask(head + body, 0)  # without reuse only the common head is cached
        assert plain[-1].n_cached == len(head)
        ask(head + old + body, 0)
        reused = ask(head + body, 8)
        assert reused[-1].n_cached == len(head) + len(body) - 1
        # the shifted KV (RoPE re-applied) still continues the text the same way
        assert tokens_of(reused) == tokens_of(plain)
    finally:
        eng.stop()


def test_speculative_decoding_keeps_the_output(model):
    """A draft model proposes tokens, the target verifies them in one batch: greedy output
    is what plain decoding gives, and the same model as its own draft agrees on most."""
    prompts = PROMPTS[:4]
    plain = open_engine(model, n_parallel=2, n_ctx=2 * 512, n_threads=2)
    try:
        want = [text_of(generate(plain, task(model, p, n=40, cache_prompt=False))) for p in prompts]
    finally:
        plain.stop()
    eng = open_engine(
        model, n_parallel=2, n_ctx=2 * 512, n_threads=2, draft_model=model, spec_n_max=4
    )
    ae = AsyncEngine(eng)
    try:

        async def go():
            streams = ae.submit_many(
                [task(model, p, n=40, cache_prompt=False) for p in prompts[:2]]
            )
            res = await asyncio.gather(*[ae.collect(s) for s in streams])
            res += [
                await ae.complete(task(model, p, n=40, cache_prompt=False)) for p in prompts[2:]
            ]
            return res

        res = run(go())
        assert [text_of(toks) for toks, _ in res] == want
        assert all(final.n_predicted == 40 for _, final in res)
        m = eng.metrics()
        assert m["n_draft_tokens"] > 0
        assert m["n_draft_accepted"] >= 0.8 * m["n_draft_tokens"]
        assert m["n_decode_total"] < 4 * 40 / 2  # several tokens per verification step
        # a task may turn drafting off; and drafting respects n_predict exactly
        toks = list(generate(eng, task(model, prompts[0], n=7, cache_prompt=False, spec_n_max=0)))
        assert toks[-1].n_predicted == 7
    finally:
        ae.close()


def test_greedy_shortcut_picks_what_the_chain_picks(model):
    """Plain greedy tasks take the argmax without running the sampler chain; post-sampling
    probabilities force the chain. Both must give the same tokens, biases included."""
    eng = open_engine(model, n_parallel=1, n_ctx=2048, n_threads=2)
    banned = model.tokenize(" Paris", False, False)[0]
    try:
        for kw in ({}, {"ignore_eos": True}, {"logit_bias": {banned: -100.0}}):
            sampling = make_sampling_params(temperature=0, **kw)
            fast, chain = (
                tokens_of(
                    generate(
                        eng,
                        task(
                            model,
                            "The capital of France is",
                            n=16,
                            sampling=sampling,
                            n_probs=1 if post else 0,
                            post_sampling_probs=post,
                        ),
                    )
                )
                for post in (False, True)
            )
            assert fast == chain and len(fast) > 0
            if "logit_bias" in kw:
                assert banned not in fast
    finally:
        eng.stop()


def test_an_encoders_embedding_steps_stop_at_half_its_width(model, minilm_path: str) -> None:
    """An encoder's attention is dense over a decode's tokens: by default (embd_step_tokens
    -1) a step takes more inputs only while it holds at most n_embd/2 tokens, so 48 short
    inputs need several decodes, each under the cap; with 0 they fill the 512-token batch.
    An input longer than the cap still goes whole, alone."""
    encoder = _core.Model(minilm_path)
    assert encoder.is_encoder and not model.is_encoder  # SmolLM2's attention is causal
    cap = encoder.n_embd // 2
    short = [
        encoder.tokenize(f"{i}: a short sentence about the sea", True, True) for i in range(48)
    ]
    long = encoder.tokenize(" ".join(f"word{i}" for i in range(100)), True, True)
    assert len(long) > cap

    def decodes(step_tokens: int, prompts: list[list[int]]) -> int:
        eng = open_engine(
            encoder, n_parallel=64, n_ctx=4096, kv_unified=True, n_threads=2, embeddings=True, pooling=1,
            embd_step_tokens=step_tokens,
        )  # fmt: skip
        try:
            ae = AsyncEngine(eng)
            tasks = []
            for p in prompts:
                t = _core.TaskParams()
                t.kind = _core.TaskKind.EMBEDDING
                t.prompt = p
                tasks.append(t)

            async def go() -> None:
                for s in ae.submit_many(tasks):
                    assert len((await s.rest())[-1].embedding) == encoder.n_embd

            run(go())
            return int(eng.metrics()["n_decode_total"])
        finally:
            eng.stop()

    n_tokens = sum(len(p) for p in short)
    assert cap < n_tokens <= 512
    assert -(-n_tokens // cap) <= decodes(-1, short) <= -(-n_tokens // cap) + 2
    assert decodes(0, short) == 1
    assert decodes(-1, [long, *short[:4]]) >= 2  # the long one alone, then the short ones


def test_waiting_tasks_are_admitted_by_priority(model):
    """One slot, busy: of the tasks waiting, the lowest priority value goes first, and
    equals go in the order they came (vLLM's meaning; the server's batch lines wait at
    --batch-priority behind interactive requests at 0)."""
    eng = open_engine(model, n_parallel=1, n_ctx=1024, n_threads=2)
    ae = AsyncEngine(eng)
    names = ["blocker", "late-1", "late-2", "urgent"]
    tasks = [
        task(model, "Once upon a time", n=24, priority=0),
        task(model, "1, 2, 3,", n=2, priority=10),
        task(model, "Water boils at", n=2, priority=10),
        task(model, "The capital of France is", n=2, priority=0),
    ]
    try:

        async def go() -> list[str]:
            order: list[str] = []

            async def drain(name: str, stream) -> None:
                async for ev in stream:
                    if ev.done:
                        order.append(name)

            streams = ae.submit_many(tasks)  # all waiting in one turn
            await asyncio.gather(*(drain(n, s) for n, s in zip(names, streams)))
            return order

        assert run(go()) == ["blocker", "urgent", "late-1", "late-2"]
    finally:
        ae.close()
