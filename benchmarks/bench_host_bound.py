"""Host work per sequence: the engine against llama.cpp's batched tools on a tiny model.

A model with n_embd 64, 2 layers and SmolLM2's 49,152-token vocabulary makes compute
negligible, so what is left at 32-256 sequences is the host work done once per sequence
per step (sampling, output rows, events): the regime a GPU is in with a small model.
For each concurrency C, in one run with the same model, threads and KV layout (unified):

* ``llama-batched-bench`` S_TG: decode only, nothing sampled (the ceiling);
* ``llama-batched``: C sequences from one prompt, each sampled with its own chain
  (top_k 40, top_p 0.95, temperature, dist), the like-for-like peer; with ``-bs`` the chain
  runs in the graph;
* the engine: C tasks from the same prompt submitted together, the same chain, stopping at
  an end-of-generation token as llama-batched does.

Modes: ``greedy`` (temperature 0: on the CPU the engine picks it in the graph by default),
``greedy_host`` (the same with the engine's ``graph_greedy=False``: read back and picked on
the host, as llama-server without ``-bs``), ``temp`` (0.8, seed 42), ``probs`` (greedy with
n_probs 10; llama-batched has no such option, so only the ceiling compares) and ``bs``
(greedy with backend sampling on both sides). ``host_us`` is the engine's own counter: the
loop thread's time outside llama_decode per busy sequence per step; ``loop_us_per_token``
is the event loop's CPU time (this process's main thread) per generated token;
``step_ms`` is the generation's wall time per decode and ``decode_ms_per_step`` the part of
it inside llama_decode (llama-batched-bench's step is ``1000 * C / S_TG``).

On a shared machine the speed of both sides drifts by tens of percent from one minute to
the next, so each concurrency's ceiling is measured right before the engine's runs at it,
and ``--rounds N`` repeats that pair N times and ends with one ``summary`` row per mode and
concurrency: the median (and range) of the paired ratios. llama-batched runs in the first
round only.

    python benchmarks/bench_host_bound.py --concurrency 1,32,64,128,256 --json
    python benchmarks/bench_host_bound.py --concurrency 32,128,256 --modes bs,greedy --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROMPT = "Hello my name is"
MODES = ("greedy", "greedy_host", "temp", "probs", "bs")


def tiny_model(cache: Path) -> Path:
    """The tiny random-weight text model of tests/fixtures/tiny_vlm.py, written once."""
    path = cache / "bench" / "tiny-text-49152.gguf"
    if not path.exists():
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from fixtures.tiny_vlm import write_text_model

        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_model(path)
    return path


def peer_args(mode: str) -> list[str]:
    if mode == "temp":
        return ["--temp", "0.8", "-s", "42"]
    return ["--temp", "0"] + (["-bs"] if mode == "bs" else [])


def run_batched(
    binary: str, model: Path, threads: int, c: int, n_prompt: int, g: int, mode: str, ngl: list[str]
) -> float:
    cmd = [binary, "-m", str(model), "-p", PROMPT, "-np", str(c), "-n", str(n_prompt + g)]
    cmd += ["-t", str(threads), "-tb", str(threads), "-kvu", *ngl, *peer_args(mode)]
    # its streams print token pieces as they come: partial UTF-8
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, errors="replace")
    m = re.search(
        r"decoded (\d+) tokens in ([\d.]+) s, speed: ([\d.]+) t/s", out.stderr + out.stdout
    )
    if not m:
        raise RuntimeError(f"llama-batched printed no speed line:\n{out.stderr[-2000:]}")
    return float(m.group(3))


def run_batched_bench(
    binary: str, model: Path, threads: int, cs: list[int], n_prompt: int, g: int, ngl: list[str]
) -> dict[int, float]:
    cmd = [binary, "-m", str(model), "-t", str(threads), "-tb", str(threads), "-kvu", *ngl]
    cmd += ["-c", str(max(cs) * (n_prompt + g) + 256), "-b", "2048", "-ub", "512"]
    cmd += ["-npp", str(n_prompt), "-ntg", str(g), "-npl", ",".join(map(str, cs))]
    cmd += ["--output-format", "jsonl"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {int(r["pl"]): float(r["speed_tg"]) for r in rows}


def sampling_for(mode: str):
    from pyllama.sampling import make_sampling_params

    # llama-batched's chain: top_k, top_p, temperature, dist
    common = dict(samplers=["top_k", "top_p", "temperature"], top_k=40, top_p=0.95, min_p=0.0)
    if mode == "temp":
        return make_sampling_params(temperature=0.8, seed=42, **common)
    return make_sampling_params(temperature=0.0, backend_sampling=mode == "bs", **common)


async def run_engine(ae, eng, prompt: list[int], c: int, g: int, mode: str) -> dict[str, float]:
    """The engine's figures for C tasks started together: tokens/s, host µs per sequence per
    step, the event loop's CPU µs a token, and a step's time in ms (wall) with its share
    inside llama_decode."""
    from pyllama.engine import make_task

    sampling = sampling_for(mode)
    n_probs = 10 if mode == "probs" else 0
    tasks = [make_task(prompt, n_predict=g, sampling=sampling, n_probs=n_probs) for _ in range(c)]
    m0 = eng.metrics()
    cpu0 = time.thread_time()  # this thread runs the loop: submit, drains, the readers
    results = await asyncio.gather(*[ae.collect(s) for s in ae.submit_many(tasks)])
    loop_cpu_s = time.thread_time() - cpu0
    m1 = eng.metrics()
    read = (
        "n_decode_total",
        "n_busy_slots_total",
        "t_batch_ms_total",
        "t_sample_ms_total",
        "t_decode_ms_total",
    )
    d = {k: m1[k] - m0[k] for k in read}
    finals = [f for _, f in results]
    n = sum(f.n_predicted for f in finals)
    span_ms = max(f.t_predicted_ms for f in finals)
    steps = max(d["n_decode_total"], 1)
    host_ms = d["t_batch_ms_total"] + d["t_sample_ms_total"]
    return {
        "engine_tok_s": round(1000.0 * n / span_ms, 1),
        "host_us_per_seq_step": round(1000.0 * host_ms / max(d["n_busy_slots_total"], 1), 2),
        "loop_us_per_token": round(1e6 * loop_cpu_s / max(n, 1), 2),
        "step_ms": round(span_ms / steps, 3),
        "decode_ms_per_step": round(d["t_decode_ms_total"] / steps, 3),
        "tokens": n,
    }


def measure_engine(
    model: object, prompt: list[int], c: int, g: int, mode: str, threads: int
) -> dict[str, float]:
    """run_engine's figures from a fresh engine sized for C tasks as llama-batched sizes its
    context: idle slots of an earlier run would keep their cached tokens in the unified KV
    cache, and every decode would attend over them."""
    from pyllama.engine import AsyncEngine, open_engine

    eng = open_engine(
        model,
        n_parallel=c,
        n_ctx=c * (len(prompt) + g + 16),
        n_batch=max(2048, c),
        n_ubatch=512,
        n_threads=threads,
        kv_unified=True,
        graph_greedy=mode != "greedy_host",
    )
    ae = AsyncEngine(eng)
    try:
        asyncio.run(run_engine(ae, eng, prompt, 1, 8, mode))  # warm-up
        return asyncio.run(run_engine(ae, eng, prompt, c, g, mode))
    finally:
        ae.close()
        eng.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", default="1,32,64,128,256")
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument(
        "--bs-max",
        type=int,
        default=64,
        help="largest C for mode bs (llama-batched -bs is slow on a CPU)",
    )
    ap.add_argument(
        "--ngl", type=int, help="layers on the GPU, both sides (default: each side's own)"
    )
    ap.add_argument("--model", help="a GGUF in place of the tiny model")
    ap.add_argument("--rounds", type=int, default=1, help="ceiling/engine pairs per concurrency")
    ap.add_argument("--json", action="store_true")
    cache = Path(os.environ.get("PYLLAMA_CACHE", Path.home() / ".cache/pyllama"))
    peer = cache / "peer/bin"
    ap.add_argument(
        "--batched", default=os.environ.get("LLAMA_BATCHED_BIN", str(peer / "llama-batched"))
    )
    ap.add_argument(
        "--batched-bench",
        default=os.environ.get("LLAMA_BATCHED_BENCH_BIN", str(peer / "llama-batched-bench")),
    )
    args = ap.parse_args()

    from pyllama import _core

    cs = [int(x) for x in args.concurrency.split(",")]
    modes = args.modes.split(",")
    g = args.gen_tokens
    path = Path(args.model) if args.model else tiny_model(cache)
    ngl = [] if args.ngl is None else ["-ngl", str(args.ngl)]
    model = _core.Model(str(path), **({} if args.ngl is None else {"n_gpu_layers": args.ngl}))
    prompt = list(model.tokenize(PROMPT, add_special=True, parse_special=False))
    ratios: dict[tuple[str, int], list[float]] = {}

    def emit(row: dict[str, object]) -> None:
        print(
            json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()),
            flush=True,
        )

    for c in cs:
        for r in range(args.rounds):
            ceiling = run_batched_bench(
                args.batched_bench, path, args.threads, [c], len(prompt), g, ngl
            )[c]
            for mode in modes:
                if mode == "bs" and c > args.bs_max:
                    continue
                got = measure_engine(model, prompt, c, g, mode, args.threads)
                tps = got["engine_tok_s"]
                row: dict[str, object] = {"mode": mode, "concurrency": c, **got}
                row.update(batched_bench_s_tg=ceiling)
                row["ratio_batched_bench"] = round(tps / ceiling, 3)
                ratios.setdefault((mode, c), []).append(tps / ceiling)
                if mode != "probs" and r == 0:
                    peer_tps = run_batched(
                        args.batched, path, args.threads, c, len(prompt), g, mode, ngl
                    )
                    row.update(batched_tok_s=peer_tps, ratio_batched=round(tps / peer_tps, 3))
                row.update(threads=args.threads, gen_tokens=g, ngl=args.ngl, model=path.name)
                if args.rounds > 1:
                    row["round"] = r
                emit(row)
    if args.rounds > 1:
        for (mode, c), rs in ratios.items():
            emit({
                "summary": True, "mode": mode, "concurrency": c, "rounds": len(rs),
                "ratio_batched_bench_median": round(statistics.median(rs), 3),
                "ratio_batched_bench_min": round(min(rs), 3),
                "ratio_batched_bench_max": round(max(rs), 3),
                "threads": args.threads, "gen_tokens": g, "ngl": args.ngl, "model": path.name,
            })  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
