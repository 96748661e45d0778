"""Aggregate decode throughput of the engine against llama-batched-bench, in one run.

For each concurrency C: C tasks with distinct random P-token prompts start together,
each generates G tokens (EOS ignored, greedy). tok_per_s = C*G / (generation time), the
same quantity as llama-batched-bench's S_TG, measured with the same model, threads,
context and batch sizes (binary from ci/build_peer.sh). Shared 2-core VMs are noisy, so
the two are interleaved (engine, batched-bench, engine, ...) and the best of each kept.

    python benchmarks/bench_engine.py --threads 2 --concurrency 1,4,8,16 \\
        --prompt-tokens 64 --gen-tokens 128 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path


async def run_engine(ae, model, c: int, p: int, g: int, rng: random.Random) -> float:
    from pyllama.engine import make_task
    from pyllama.sampling import make_sampling_params

    sampling = make_sampling_params(temperature=0, ignore_eos=True)
    tasks = [
        make_task(
            [rng.randrange(model.n_vocab) for _ in range(p)],
            n_predict=g,
            sampling=sampling,
            cache_prompt=False,
        )
        for _ in range(c)
    ]
    # submitted together, as batched-bench starts them: all prompts share the first batch,
    # so every sequence's generation time covers the same decode steps
    results = await asyncio.gather(*[ae.collect(s) for s in ae.submit_many(tasks)])
    finals = [f for _, f in results]
    n = sum(f.n_predicted for f in finals)
    return n / (max(f.t_predicted_ms for f in finals) / 1000.0)


def run_batched_bench(
    binary: str, model: str, threads: int, n_ctx: int, cs: list[int], p: int, g: int
) -> dict[int, float]:
    cmd = [
        binary,
        "-m",
        model,
        "-t",
        str(threads),
        "-tb",
        str(threads),
        "-c",
        str(n_ctx),
        "-b",
        "2048",
        "-ub",
        "512",
        "-npp",
        str(p),
        "-ntg",
        str(g),
        "-npl",
        ",".join(map(str, cs)),
        "--output-format",
        "jsonl",
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {int(r["pl"]): float(r["speed_tg"]) for r in rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", default="1,4,8,16")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument(
        "--repeat", type=int, default=3, help="interleaved runs of each side per concurrency"
    )
    ap.add_argument("--json", action="store_true")
    cache = Path(os.environ.get("PYLLAMA_CACHE", Path.home() / ".cache/pyllama"))
    ap.add_argument(
        "--batched-bench",
        default=os.environ.get(
            "LLAMA_BATCHED_BENCH_BIN", str(cache / "peer/bin/llama-batched-bench")
        ),
    )
    args = ap.parse_args()

    from pyllama import _core, demo_model
    from pyllama.engine import AsyncEngine, open_engine

    model_path = args.model or demo_model()
    cs = [int(x) for x in args.concurrency.split(",")]
    per_seq = 64 * ((args.prompt_tokens + args.gen_tokens + 16 + 63) // 64)
    n_ctx = max(cs) * per_seq
    model = _core.Model(model_path)
    # same shape as batched-bench: one sequence per parallel prompt, separate KV streams
    eng = open_engine(
        model, n_parallel=max(cs), n_ctx=n_ctx, n_batch=2048, n_ubatch=512, n_threads=args.threads
    )
    ae = AsyncEngine(eng)
    rng = random.Random(0)

    async def engine_once(c: int) -> float:
        return await run_engine(ae, model, c, args.prompt_tokens, args.gen_tokens, rng)

    asyncio.run(run_engine(ae, model, 1, args.prompt_tokens, 16, rng))  # warm-up
    ours: dict[int, float] = {}
    theirs: dict[int, float] = {}
    pairs: dict[int, list[tuple[float, float]]] = {}
    for c in cs:
        for _ in range(args.repeat):
            mine = asyncio.run(engine_once(c))
            ours[c] = max(ours.get(c, 0.0), mine)
            bb = run_batched_bench(
                args.batched_bench,
                model_path,
                args.threads,
                n_ctx,
                [c],
                args.prompt_tokens,
                args.gen_tokens,
            )
            theirs[c] = max(theirs.get(c, 0.0), bb[c])
            pairs.setdefault(c, []).append((mine, bb[c]))
    ae.close()
    for c in cs:
        row = {
            "concurrency": c,
            "tok_per_s": round(ours[c], 2),
            "batched_bench_s_tg": round(theirs[c], 2),
            "ratio": round(ours[c] / theirs[c], 3),  # best vs best
            # median over adjacent (engine, batched-bench) pairs: robust to drift
            "ratio_paired_median": round(statistics.median(a / b for a, b in pairs[c]), 3),
            "runs": [[round(a, 1), round(b, 1)] for a, b in pairs[c]],
            "threads": args.threads,
            "prompt_tokens": args.prompt_tokens,
            "gen_tokens": args.gen_tokens,
            "n_ctx": n_ctx,
        }
        print(
            json.dumps(row)
            if args.json
            else f"C={c:3d}  engine {row['tok_per_s']:8.2f} tok/s  batched-bench {row['batched_bench_s_tg']:8.2f}  ratio {row['ratio']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
