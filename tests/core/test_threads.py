"""decode and sampling release the GIL: Python threads keep running meanwhile."""

from __future__ import annotations

import threading
import time

from pyllama import Batch, Context


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
