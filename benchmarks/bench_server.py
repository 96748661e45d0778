"""Streaming clients against pyllama-server and llama-server started with the same flags.

Both servers run at once (idle between turns) and take turns: for each concurrency C,
C clients each stream K /completion requests of G tokens one after the other (distinct
prompts, EOS ignored; K rounds keep a one-client turn long enough to measure), on
pyllama-server, then on llama-server, R times. Per side: aggregate tokens/s (all tokens
/ wall time of the turn), time to first token p50/p99, inter-token latency p50/p99. The
ratio is best turn over best turn; ratio_median is the median of the R paired turns.
``--client-procs P`` spreads the clients over P processes (one asyncio loop each), so the
client is not what limits 32-64 streams; ``--server-flags`` go to both servers alike (e.g.
``-bs`` for backend sampling on both).

    python benchmarks/bench_server.py --threads 2 --concurrency 1,4,8 --json
    python benchmarks/bench_server.py --concurrency 32,64 --parallel 64 --client-procs 4 \
        --server-flags=-bs --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import shlex
import statistics
import sys
import time
from typing import Any

import httpx
from servers import add_llama_server_argument, start, stop


async def one(client: httpx.AsyncClient, url: str, prompt: str, g: int) -> dict[str, Any]:
    body = {"prompt": prompt, "n_predict": g, "ignore_eos": True, "temperature": 0, "stream": True}
    t0 = time.perf_counter()
    stamps: list[float] = []
    n = 0
    # a connection per request: llama-server may close a kept-alive one after a stream
    close = {"Connection": "close"}
    async with client.stream("POST", url + "/completion", json=body, headers=close) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            ev = json.loads(line[6:])
            if ev.get("content"):
                stamps.append(time.perf_counter())
            if ev.get("stop"):
                n = ev["tokens_predicted"]
    return {"t0": t0, "stamps": stamps, "n": n, "end": time.perf_counter()}


async def client_rounds(
    client: httpx.AsyncClient, url: str, prompts: list[str], g: int
) -> list[dict[str, Any]]:
    return [await one(client, url, p, g) for p in prompts]


async def clients(url: str, ids: list[int], g: int, seed: int, rounds: int) -> list[dict[str, Any]]:
    def prompt(i: int, k: int) -> str:
        return f"Request {seed}-{i}-{k}: write a long story about the number {i * 7919 + k}."

    async with httpx.AsyncClient(timeout=600) as client:
        per_client = await asyncio.gather(
            *[client_rounds(client, url, [prompt(i, k) for k in range(rounds)], g) for i in ids]
        )
    return [r for rs in per_client for r in rs]


def _client_process(job: tuple[str, list[int], int, int, int]) -> list[dict[str, Any]]:
    # perf_counter is CLOCK_MONOTONIC on Linux: stamps compare across processes
    return asyncio.run(clients(*job))


def turn(url: str, c: int, g: int, seed: int, rounds: int, procs: int) -> dict[str, float]:
    t0 = time.perf_counter()
    if procs <= 1:
        res = asyncio.run(clients(url, list(range(c)), g, seed, rounds))
    else:
        jobs = [(url, list(range(p, c, procs)), g, seed, rounds) for p in range(procs)]
        with multiprocessing.get_context("spawn").Pool(procs) as pool:
            t0 = time.perf_counter()  # the pool's start-up is not the servers' time
            res = [r for part in pool.map(_client_process, [j for j in jobs if j[1]]) for r in part]
        t0 = min(r["t0"] for r in res)
    wall = max(r["end"] for r in res) - t0
    ttft = [1e3 * (r["stamps"][0] - r["t0"]) for r in res if r["stamps"]]
    itl = [1e3 * (b - a) for r in res for a, b in zip(r["stamps"], r["stamps"][1:])]
    q = statistics.quantiles
    return {
        "tok_per_s": sum(r["n"] for r in res) / wall,
        "ttft_p50_ms": statistics.median(ttft),
        "ttft_p99_ms": q(ttft, n=100)[98] if len(ttft) > 1 else ttft[0],
        "itl_p50_ms": statistics.median(itl),
        "itl_p99_ms": q(itl, n=100)[98],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx-size", type=int, default=16384)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4, help="requests per client per turn")
    ap.add_argument("--client-procs", type=int, default=1, help="client processes")
    ap.add_argument("--server-flags", default="", help="extra flags for both servers")
    ap.add_argument("--json", action="store_true")
    add_llama_server_argument(ap)
    args = ap.parse_args()
    from pyllama import demo_model

    model = args.model or demo_model()
    flags = [
        "-m",
        model,
        "-t",
        str(args.threads),
        "-c",
        str(args.ctx_size),
        "-np",
        str(args.parallel),
        *shlex.split(args.server_flags),
    ]
    ours, ours_url = start([sys.executable, "-m", "pyllama.server", *flags])
    procs = [ours]
    try:
        theirs, theirs_url = start([args.llama_server, *flags, "--no-webui"])
        procs.append(theirs)
        for c in [int(x) for x in args.concurrency.split(",")]:
            best: dict[str, dict[str, float]] = {}
            paired: list[float] = []
            for rep in range(args.repeat):
                got = {}
                for name, url in (("pyllama", ours_url), ("llama_server", theirs_url)):
                    r = got[name] = turn(
                        url, c, args.gen_tokens, rep, args.rounds, args.client_procs
                    )
                    if name not in best or r["tok_per_s"] > best[name]["tok_per_s"]:
                        best[name] = r
                paired.append(got["pyllama"]["tok_per_s"] / got["llama_server"]["tok_per_s"])
            row: dict[str, Any] = {"concurrency": c, "gen_tokens": args.gen_tokens}
            row.update(server_flags=args.server_flags, client_procs=args.client_procs)
            for name, r in best.items():
                row.update({f"{name}_{k}": round(v, 2) for k, v in r.items()})
            row["ratio"] = round(
                best["pyllama"]["tok_per_s"] / best["llama_server"]["tok_per_s"], 3
            )
            row["ratio_median"] = round(statistics.median(paired), 3)
            print(json.dumps(row) if args.json else row, flush=True)
    finally:
        for p in procs:
            stop(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
