"""decode and sampling release the GIL: Python threads keep running meanwhile; a context
computes on its own thread."""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pyllama import Batch, Context, LlamaError


def test_python_thread_runs_during_decode(llm, ticker):
    ctx = Context(llm.model, n_ctx=2048, n_batch=2048, n_ubatch=512, n_threads=2)
    tokens = llm.model.tokenize("hello world " * 400, True, False)[:1800]
    batch = Batch(2048, 1)
    batch.add_sequence(tokens, 0, 0, True)

    with ticker:
        time.sleep(0.05)
        before = ticker.ticks
        start = time.perf_counter()
        ctx.decode(batch)  # a long prompt: hundreds of milliseconds of C++ work
        elapsed = time.perf_counter() - start
        during = ticker.ticks - before
    assert elapsed > 0.1, f"decode too quick ({elapsed:.3f}s) to tell"
    # with the GIL held the thread could not tick at all; allow for a loaded machine
    assert during >= elapsed * 1000 * 0.2, f"only {during} ticks in {elapsed:.3f}s"


def test_two_threads_share_a_llama(llm):
    results: dict[int, str] = {}

    def work(i: int) -> None:
        results[i] = llm.create_completion("Paris is", max_tokens=8, temperature=0)["choices"][0][
            "text"
        ]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0] == results[1] and results[0]


def _os_threads() -> set[int]:
    return {int(t) for t in os.listdir("/proc/self/task")}


def _settled_threads() -> set[int]:
    """The process's OS threads once earlier tests' leftovers have come and gone: objects
    collected late end their threads, and a whole suite's run once showed one more thread
    appearing here (the release job's suite, 2026-11-26) where this file alone never does."""
    gc.collect()
    seen = _os_threads()
    for _ in range(40):
        time.sleep(0.05)
        now = _os_threads()
        if now == seen:
            return now
        seen = now
    return seen


def _names(tids: set[int]) -> dict[int, str]:
    names = {}
    for tid in tids:
        try:
            names[tid] = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
        except OSError:
            names[tid] = "(gone)"
    return names


def _decode_once(ctx: Context, tokens: list[int]) -> np.ndarray:
    ctx.memory_clear(True)
    batch = Batch(len(tokens), 1)
    batch.add_sequence(tokens, 0, 0, True)
    ctx.decode(batch)
    return np.array(ctx.logits_ith(-1))


def test_context_computes_on_its_own_thread(llm):
    """ggml's OpenMP keeps a worker pool per thread that ever computed, and two live pools
    slow every barrier (csrc/core/compute_thread.hpp): a context computes on its own
    thread whoever calls it, and that thread (with its pool) ends with the context."""
    tokens = llm.model.tokenize("The capital of France is", True, False)
    before = _settled_threads()
    ctx = Context(llm.model, n_ctx=256, n_threads=2)
    main_logits = _decode_once(ctx, tokens)
    with_ctx = _settled_threads()
    assert len(with_ctx - before) >= 1  # the compute thread (and its OpenMP worker)

    # other Python threads compute on that same thread: no new OS threads, same logits
    other: list[np.ndarray] = []
    for _ in range(3):
        t = threading.Thread(target=lambda c: other.append(_decode_once(c, tokens)), args=(ctx,))
        t.start()
        t.join()
    # a joined Python thread's OS thread ends a moment after join() returns (busy machine):
    # wait for those; a second OpenMP pool would stay
    deadline = time.monotonic() + 10
    while (extra := _os_threads() - with_ctx) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not extra, f"new OS threads after foreign-thread decodes: {_names(extra)}"
    for logits in other:
        np.testing.assert_array_equal(logits, main_logits)

    del ctx
    left = _settled_threads() - before
    assert not left, f"threads outliving the context: {_names(left)}"


def test_compute_thread_failure_carries_llama_log(llm):
    ctx = Context(llm.model, n_ctx=64, n_batch=64, n_threads=2)
    batch = Batch(2, 1)
    batch.add(llm.model.n_vocab + 5, 0, [0], True)  # no such token
    with pytest.raises(LlamaError, match=r"invalid batch: .*token"):
        ctx.decode(batch)
