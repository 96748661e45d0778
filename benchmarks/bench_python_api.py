"""pyllama's Python API against llama-cpp-python's, in one process each, same model.

Every call generates exactly ``--tokens`` tokens: end-of-generation is banned by
``logit_bias`` on both sides (llama-cpp-python applies it as a Python logits processor, a
copy of one logits row per token). Single stream: ``Llama.create_completion`` tokens/s. Concurrent callers in one service:
N callers each ask a completion of ``--tokens`` tokens at once; pyllama serves them with
``AsyncLlama`` (asyncio tasks, the batching engine), llama-cpp-python with one ``Llama``
shared by N threads behind a lock (its Llama is not safe to call from two threads at
once; that is how a service shares it). Aggregate tokens/s = tokens generated / wall time.

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
from pathlib import Path

PROMPT = "Once upon a time, in a small village by the sea, there lived"
DEFAULT_LCP = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "pyllama/bench-lcp-venv/bin/python"
)


def lcp_side(model: str, threads: int, tokens: int, concurrency: list[int]) -> dict:
    from llama_cpp import Llama

    llm = Llama(
        model, n_ctx=2048, n_threads=threads, n_threads_batch=threads, n_batch=512, verbose=False
    )
    ban = {llm.token_eos(): -1e9}
    lock = threading.Lock()
    llm(PROMPT, max_tokens=8, temperature=0)  # warm-up
    out: dict = {}
    start = time.perf_counter()
    n = llm(PROMPT, max_tokens=tokens, temperature=0, logit_bias=ban)["usage"]["completion_tokens"]
    out["single"] = n / (time.perf_counter() - start)
    for c in concurrency:
        counts: list[int] = []

        def call(i: int, counts: list[int] = counts) -> None:
            with lock:
                r = llm(f"{PROMPT} {i}", max_tokens=tokens, temperature=0, logit_bias=ban)
            counts.append(r["usage"]["completion_tokens"])

        ts = [threading.Thread(target=call, args=(i,)) for i in range(c)]
        start = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        out[f"c{c}"] = sum(counts) / (time.perf_counter() - start)
    return out


def pyllama_side(model: str, threads: int, tokens: int, concurrency: list[int]) -> dict:
    import asyncio

    from pyllama import AsyncLlama, Llama

    out: dict = {}
    llm = Llama(model, n_ctx=2048, n_threads=threads, n_batch=512, verbose=False)
    ban = {llm.token_eos(): -1e9}
    llm(PROMPT, max_tokens=8, temperature=0)
    start = time.perf_counter()
    n = llm(PROMPT, max_tokens=tokens, temperature=0, logit_bias=ban)["usage"]["completion_tokens"]
    out["single"] = n / (time.perf_counter() - start)
    llm.close()
    allm = AsyncLlama(
        model,
        n_parallel=max(concurrency),
        n_ctx=2048,
        n_threads=threads,
        n_batch=512,
        verbose=False,
    )

    async def run(c: int) -> float:
        start = time.perf_counter()
        rs = await asyncio.gather(
            *[allm(f"{PROMPT} {i}", max_tokens=tokens, temperature=0) for i in range(c)]
        )
        return sum(r["usage"]["completion_tokens"] for r in rs) / (time.perf_counter() - start)

    asyncio.run(allm(PROMPT, max_tokens=8, temperature=0))
    for c in concurrency:
        out[f"c{c}"] = asyncio.run(run(c))
    allm.close()
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
    ap.add_argument("--side", choices=["both", "pyllama", "llama_cpp"], default="both")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    conc = [int(x) for x in a.concurrency.split(",")]
    if a.model is None:
        from pyllama.models import demo_model

        a.model = demo_model()
    if a.side != "both":
        side = pyllama_side if a.side == "pyllama" else lcp_side
        print(json.dumps(side(a.model, a.threads, a.tokens, conc)))
        return 0
    runs: dict[str, list[dict]] = {"pyllama": [], "llama_cpp": []}
    for _ in range(a.repeat):
        for side, python in (("pyllama", sys.executable), ("llama_cpp", a.lcp_python)):
            cmd = [python, __file__, "--side", side, "--model", a.model, "--threads", str(a.threads),
                   "--tokens", str(a.tokens), "--concurrency", a.concurrency]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    keys = ["single"] + [f"c{c}" for c in conc]
    best = {side: {k: max(r[k] for r in rs) for k in keys} for side, rs in runs.items()}
    print("| measure | pyllama tok/s | llama-cpp-python tok/s | ratio |")
    print("| --- | --- | --- | --- |")
    for k in keys:
        p, q = best["pyllama"][k], best["llama_cpp"][k]
        label = (
            "single stream (Llama)" if k == "single" else f"{k[1:]} callers (AsyncLlama / threads)"
        )
        print(f"| {label} | {p:.1f} | {q:.1f} | {p / q:.2f} |")
    if a.json:
        out = Path(__file__).parent / "results" / f"python_api_{time.strftime('%Y-%m-%d')}.jsonl"
        with out.open("a") as f:
            f.write(json.dumps({"args": vars(a), "runs": runs, "best": best}) + "\n")
        print(f"raw: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
