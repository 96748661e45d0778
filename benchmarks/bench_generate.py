"""Single-stream decode speed: pyllama's Llama.generate against llama-bench tg.

Both run in this process's session on the same model, thread count and build flags
(llama-bench from ci/build_peer.sh, i.e. the same vendor tree). llama-bench's tg test
decodes N tokens one at a time after an empty prompt; we do the same: one BOS token,
then N greedy tokens with EOS ignored, timing only the decode loop.

    python benchmarks/bench_generate.py --threads 2 --tokens 128 --repeat 5 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def bench_pyllama(model: str, threads: int, n: int, repeat: int) -> list[float]:
    from pyllama import Llama

    llm = Llama(model, n_ctx=max(512, n + 16), n_threads=threads, verbose=False)
    bos = llm.token_bos()
    rates = []
    for _ in range(repeat + 1):  # first run warms up
        llm.reset()
        start = time.perf_counter()
        count = 0
        gen = llm.generate([bos], temp=0)  # endless, as llama-cpp-python's: EOS is not special
        for _ in gen:
            count += 1
            if count == n:
                break
        gen.close()
        rates.append(count / (time.perf_counter() - start))
    return rates[1:]


def bench_llama_bench(binary: str, model: str, threads: int, n: int, repeat: int) -> list[float]:
    cmd = [
        binary,
        "-m",
        model,
        "-t",
        str(threads),
        "-p",
        "0",
        "-n",
        str(n),
        "-r",
        str(repeat),
        "-o",
        "json",
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [r for r in json.loads(out) if r.get("n_gen") == n]
    return [float(x) for x in rows[0]["samples_ts"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF (default: the demo model)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--llama-bench",
        default=os.environ.get(
            "LLAMA_BENCH_BIN",
            str(
                Path(os.environ.get("PYLLAMA_CACHE", Path.home() / ".cache/pyllama"))
                / "peer/bin/llama-bench"
            ),
        ),
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.model is None:
        from pyllama import demo_model

        args.model = demo_model()

    ours = bench_pyllama(args.model, args.threads, args.tokens, args.repeat)
    theirs = bench_llama_bench(args.llama_bench, args.model, args.threads, args.tokens, args.repeat)
    result = {
        "model": Path(args.model).name,
        "threads": args.threads,
        "tokens": args.tokens,
        "pyllama_tok_per_s": round(statistics.median(ours), 2),
        "llama_bench_tok_per_s": round(statistics.median(theirs), 2),
    }
    result["ratio"] = round(result["pyllama_tok_per_s"] / result["llama_bench_tok_per_s"], 3)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>24}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
