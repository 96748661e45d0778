"""AsyncLlama and BatchedLlama: llama-cpp-python's calls over the batching engine.
Concurrent callers are decoded in shared batches (the engine's decode count shows it),
a stream closed early frees its slot, and answers have Llama's shape."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pyllama import AsyncLlama, BatchedLlama, Llama

MSGS = [{"role": "user", "content": "Write a short poem about the sea."}]
N = 24


@pytest.fixture(scope="module")
def allm(smollm_path: str):
    llm = AsyncLlama(smollm_path, n_parallel=8, n_ctx=1024, n_threads=2, verbose=False)
    yield llm
    llm.close()


def test_eight_coroutines_share_decode_steps(allm: AsyncLlama) -> None:
    async def main() -> list[dict]:
        return await asyncio.gather(
            *[
                allm.create_chat_completion(messages=MSGS, max_tokens=N, temperature=0)
                for _ in range(8)
            ]
        )

    before = allm.metrics()
    outs = asyncio.run(main())
    after = allm.metrics()
    assert all(o["usage"]["completion_tokens"] == N for o in outs)
    assert all(o["choices"][0]["message"]["content"] for o in outs)
    tokens = after["n_predicted_total"] - before["n_predicted_total"]
    steps = after["n_decode_total"] - before["n_decode_total"]
    assert tokens == 8 * N
    # one at a time would need a decode per token; batched, the 8 advance together
    assert steps <= N + 8, (steps, tokens)


def test_async_answer_has_llamas_shape(allm: AsyncLlama, smollm_path: str) -> None:
    """Same prompt tokens and response shape as Llama (the text may differ in late tokens:
    batched decoding does not round exactly as one sequence alone)."""
    ref = Llama(smollm_path, n_ctx=1024, verbose=False)
    want = ref.create_chat_completion(messages=MSGS, max_tokens=N, temperature=0)
    got = asyncio.run(allm.create_chat_completion(messages=MSGS, max_tokens=N, temperature=0))
    assert got["usage"] == want["usage"]
    assert got.keys() == want.keys() and got["choices"][0].keys() == want["choices"][0].keys()
    assert (
        got["choices"][0]["message"]["content"][:8] == want["choices"][0]["message"]["content"][:8]
    )


def test_stream_closed_early_frees_its_slot(allm: AsyncLlama) -> None:
    async def main() -> list[str]:
        stream = await allm.create_completion("Once upon a time", max_tokens=400, stream=True)
        texts = []
        async for chunk in stream:
            texts.append(chunk["choices"][0]["text"])
            if len(texts) == 3:
                break
        await stream.aclose()
        return texts

    before = allm.metrics()
    texts = asyncio.run(main())
    assert len(texts) == 3
    after = allm.metrics()
    assert after["n_predicted_total"] - before["n_predicted_total"] < 400

    # the slot is free again: 8 new callers all run at once
    async def eight() -> list[dict]:
        calls = [allm.create_completion("Hi", max_tokens=4, temperature=0) for _ in range(8)]
        return await asyncio.wait_for(asyncio.gather(*calls), 120)

    assert len(asyncio.run(eight())) == 8


def test_async_stream_chunks_and_embeddings_errors(allm: AsyncLlama) -> None:
    async def main() -> list[dict]:
        stream = await allm.create_chat_completion(
            messages=MSGS, max_tokens=8, stream=True, temperature=0
        )
        return [c async for c in stream]

    chunks = asyncio.run(main())
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    with pytest.raises(RuntimeError, match="embedding=True"):
        asyncio.run(allm.embed("x"))
    with pytest.raises(ValueError, match="logits_processor"):
        asyncio.run(allm.create_completion("x", logits_processor=[lambda i, s: s]))


def test_batched_llama_from_threads(smollm_path: str) -> None:
    llm = BatchedLlama(smollm_path, n_parallel=4, n_ctx=512, n_threads=2, verbose=False)
    results: list[dict] = []
    lock = threading.Lock()

    def call() -> None:
        out = llm.create_completion("The capital of France is", max_tokens=N, temperature=0)
        with lock:
            results.append(out)

    before = llm.metrics()
    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    after = llm.metrics()
    assert len(results) == 4
    assert all(r["usage"]["completion_tokens"] == N for r in results)
    assert after["n_decode_total"] - before["n_decode_total"] < 4 * N  # shared steps
    chunks = list(llm.create_chat_completion(messages=MSGS, max_tokens=6, stream=True))
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    llm.close()


def test_async_embeddings(minilm_path: str) -> None:
    llm = AsyncLlama(minilm_path, n_parallel=2, embedding=True, verbose=False)
    ref = Llama(minilm_path, embedding=True, verbose=False)
    got = asyncio.run(llm.create_embedding(["a cat", "a dog"]))
    want = ref.create_embedding(["a cat", "a dog"])
    assert got["usage"] == want["usage"]
    for g, w in zip(got["data"], want["data"]):
        assert max(abs(a - b) for a, b in zip(g["embedding"], w["embedding"])) < 1e-3
    llm.close()
