"""pyllama's Python API against llama-cpp-python's, in one process each, same model.

Every call generates exactly ``--tokens`` tokens: end-of-generation is banned by
``logit_bias`` on both sides (llama-cpp-python applies it as a Python logits processor, a
copy of one logits row per token).

- single stream: ``Llama.create_completion`` tokens/s, called from the main thread;
- single chat stream: ``Llama.create_chat_completion`` with one user message, the GGUF's
  chat template on both sides;
- single stream from another thread: the same call from a second thread once the main
  thread has computed (a web framework's worker pool). ggml's OpenMP keeps a worker pool
  per calling thread, and two live pools on a machine with as many threads as cores make
  every barrier sleep; pyllama computes on each context's own thread, llama-cpp-python on
  the caller's;
- N callers in one service: N completions asked at once. pyllama serves them with
  ``AsyncLlama`` (asyncio tasks, the batching engine); llama-cpp-python with one ``Llama``
  behind a one-thread executor (its Llama is not safe to call from two threads at once, and
  one thread also spares it the pool trap above: its best case). Aggregate tokens/s =
  tokens generated / wall time; and the wall time of the N calls at once against N calls
  one after another;
- N threads: N completions at once, each from its own thread (a thread-pool framework):
  pyllama's thread-safe ``BatchedLlama``, llama-cpp-python's ``Llama`` behind a lock, as
  its own server shares it.

llama-cpp-python runs in its own venv (benchmarks/llama_cpp_python_venv.sh), in a child
process running this file with ``--side llama_cpp``; the two sides take turns.

    python benchmarks/bench_python_api.py --threads 2 --concurrency 1,4,8 --repeat 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

PROMPT = "Once upon a time, in a small village by the sea, there lived"
CHAT = [{"role": "user", "content": "Tell me a story about a small village by the sea."}]
DEFAULT_LCP = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "pyllama/bench-lcp-venv/bin/python"
)


def lcp_side(model: str, threads: int, tokens: int, concurrency: list[int], ngl: int) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    from llama_cpp import Llama

    llm = Llama(
        model,
        n_ctx=2048,
        n_threads=threads,
        n_threads_batch=threads,
        n_batch=512,
        n_gpu_layers=ngl,
        verbose=False,
    )
    ban = {llm.token_eos(): -1e9}

    def call(i: int | None) -> int:
        prompt = PROMPT if i is None else f"{PROMPT} {i}"
        r = llm(prompt, max_tokens=tokens, temperature=0, logit_bias=ban)
        return r["usage"]["completion_tokens"]

    def chat() -> int:
        r = llm.create_chat_completion(CHAT, max_tokens=tokens, temperature=0, logit_bias=ban)
        return r["usage"]["completion_tokens"]

    out: dict = {}
    # Every call but one on the service's one compute thread (llama-cpp-python's best case).
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(call, None).result()  # warm-up
        out["single"] = pool.submit(timed_rate, lambda: call(None)).result()
        out["chat"] = pool.submit(timed_rate, chat).result()
        for c in concurrency:
            start = time.perf_counter()
            n = sum(f.result() for f in [pool.submit(call, i) for i in range(c)])
            out[f"c{c}"] = n / (time.perf_counter() - start)
        n_seq = max(concurrency)
        start = time.perf_counter()
        for i in range(n_seq):
            pool.submit(call, i).result()
        out[f"seq{n_seq}_s"] = time.perf_counter() - start
        # the pool's thread has computed and lives on: now a call from a second thread
        out["single_other_thread"] = timed_rate(lambda: call(None))
    lock = threading.Lock()  # how llama-cpp-python's own server shares its Llama

    def locked(i: int) -> int:
        with lock:
            return call(i)

    out[f"threads{n_seq}"] = threads_rate(locked, n_seq)
    out[f"c{n_seq}_s"] = n_seq * tokens / out[f"c{n_seq}"]
    return out


def timed_rate(fn: Callable[[], int]) -> float:
    """Tokens per second of fn(), which returns the tokens it generated."""
    start = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - start)


def threads_rate(call: Callable[[int], int], n: int) -> float:
    """Aggregate tokens/s of call(0..n-1), each on its own new thread, all at once."""
    counts: list[int] = []
    ts = [threading.Thread(target=lambda i=i: counts.append(call(i))) for i in range(n)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def in_other_thread(fn: Callable[[], float]) -> float:
    """fn() computed on a new thread."""
    result: list = []
    t = threading.Thread(target=lambda: result.append(fn()))
    t.start()
    t.join()
    return result[0]


def pyllama_side(model: str, threads: int, tokens: int, concurrency: list[int], ngl: int) -> dict:
    import asyncio

    from pyllama import AsyncLlama, BatchedLlama, Llama

    out: dict = {}
    common = {"n_ctx": 2048, "n_threads": threads, "n_batch": 512, "n_gpu_layers": ngl}
    llm = Llama(model, **common, verbose=False)
    ban = {llm.token_eos(): -1e9}
    llm(PROMPT, max_tokens=8, temperature=0)

    def single() -> int:
        r = llm(PROMPT, max_tokens=tokens, temperature=0, logit_bias=ban)
        return r["usage"]["completion_tokens"]

    def chat() -> int:
        r = llm.create_chat_completion(CHAT, max_tokens=tokens, temperature=0, logit_bias=ban)
        return r["usage"]["completion_tokens"]

    out["single"] = timed_rate(single)
    out["chat"] = timed_rate(chat)
    out["single_other_thread"] = in_other_thread(lambda: timed_rate(single))
    llm.close()
    allm = AsyncLlama(model, n_parallel=max(concurrency), **common, verbose=False)

    def call(i: int):  # the coroutine of one completion
        return allm(f"{PROMPT} {i}", max_tokens=tokens, temperature=0, logit_bias=ban)

    async def run(c: int) -> float:
        start = time.perf_counter()
        rs = await asyncio.gather(*[call(i) for i in range(c)])
        return sum(r["usage"]["completion_tokens"] for r in rs) / (time.perf_counter() - start)

    async def sequential(c: int) -> float:
        start = time.perf_counter()
        for i in range(c):
            await call(i)
        return time.perf_counter() - start

    asyncio.run(allm(PROMPT, max_tokens=8, temperature=0))
    for c in concurrency:
        out[f"c{c}"] = asyncio.run(run(c))
    n_seq = max(concurrency)
    out[f"seq{n_seq}_s"] = asyncio.run(sequential(n_seq))
    out[f"c{n_seq}_s"] = n_seq * tokens / out[f"c{n_seq}"]
    allm.close()
    # the thread-safe facade: n_seq threads at once, as a thread-pool framework calls it
    blm = BatchedLlama(model, n_parallel=n_seq, **common, verbose=False)
    blm(PROMPT, max_tokens=8, temperature=0)

    def blocking(i: int) -> int:
        r = blm(f"{PROMPT} {i}", max_tokens=tokens, temperature=0, logit_bias=ban)
        return r["usage"]["completion_tokens"]

    out[f"threads{n_seq}"] = threads_rate(blocking, n_seq)
    blm.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--lcp-python", default=str(DEFAULT_LCP), help="python of the llama-cpp-python venv"
    )
    ap.add_argument("-ngl", "--n-gpu-layers", type=int, default=0, help="0 (the API's default)")
    ap.add_argument("--side", choices=["both", "pyllama", "llama_cpp"], default="both")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    conc = [int(x) for x in a.concurrency.split(",")]
    if a.model is None:
        from pyllama.models import demo_model

        a.model = demo_model()
    if a.side != "both":
        side = pyllama_side if a.side == "pyllama" else lcp_side
        print(json.dumps(side(a.model, a.threads, a.tokens, conc, a.n_gpu_layers)))
        return 0
    runs: dict[str, list[dict]] = {"pyllama": [], "llama_cpp": []}
    for _ in range(a.repeat):
        for side, python in (("pyllama", sys.executable), ("llama_cpp", a.lcp_python)):
            cmd = [python, __file__, "--side", side, "--model", a.model, "--threads", str(a.threads),
                   "--tokens", str(a.tokens), "--concurrency", a.concurrency,
                   "-ngl", str(a.n_gpu_layers)]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    keys = (
        ["single", "chat", "single_other_thread"]
        + [f"c{c}" for c in conc]
        + [f"threads{max(conc)}"]
    )
    n = max(conc)
    walls = [f"c{n}_s", f"seq{n}_s"]
    best = {
        side: {k: max(r[k] for r in rs) for k in keys} | {k: min(r[k] for r in rs) for k in walls}
        for side, rs in runs.items()
    }
    print("| measure | pyllama tok/s | llama-cpp-python tok/s | ratio |")
    print("| --- | --- | --- | --- |")
    for k in keys:
        p, q = best["pyllama"][k], best["llama_cpp"][k]
        label = {
            "single": "single stream (Llama)",
            "chat": "single chat stream (create_chat_completion)",
            "single_other_thread": "single stream, from a second thread",
            f"threads{max(conc)}": f"{max(conc)} threads (BatchedLlama / Llama with a lock)",
        }.get(k, f"{k[1:]} callers (AsyncLlama / one-thread executor)")
        print(f"| {label} | {p:.1f} | {q:.1f} | {p / q:.2f} |")
    print(f"\n| {n} calls of {a.tokens} tokens | pyllama s | llama-cpp-python s |")
    print("| --- | --- | --- |")
    for k, label in zip(walls, ("at once", "one after another"), strict=True):
        print(f"| {label} | {best['pyllama'][k]:.1f} | {best['llama_cpp'][k]:.1f} |")
    if a.json:
        out = Path(__file__).parent / "results" / f"python_api_{time.strftime('%Y-%m-%d')}.jsonl"
        with out.open("a") as f:
            f.write(json.dumps({"args": vars(a), "runs": runs, "best": best}) + "\n")
        print(f"raw: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
