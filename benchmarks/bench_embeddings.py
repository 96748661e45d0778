"""Embeddings and rerank throughput: pyllama-server against llama-server with the same flags.

Both servers run at once (idle between turns) and take turns. A turn is C concurrent
clients each sending requests of B texts (short sentences, distinct across the whole turn)
to ``/v1/embeddings`` (or B documents with one query to ``/v1/rerank`` with ``--rerank``),
one after the other, until the turn has sent at least ``--texts`` texts and every client
has sent two requests. Reported per (C, B): texts per second of each side (best of
``--repeat`` turns) and the ratio, best over best; ``ratio_median`` is the median of the
paired turns. Retrieval pipelines send exactly this: batches of chunks, a few at a time.

    python benchmarks/bench_embeddings.py --json
    python benchmarks/bench_embeddings.py --rerank --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from servers import (
    add_llama_server_argument,
    append_results,
    cpu_name,
    encoder_model,
    start,
    stop,
)

WORDS = [
    "river", "harbour", "library", "museum", "orchard", "station", "garden", "market",
    "bridge", "tower", "valley", "forest", "engine", "letter", "winter", "summer", "window",
    "morning", "evening", "kitchen", "teacher", "doctor", "farmer", "painter", "mountain",
    "island", "village", "city", "road", "train", "ship", "paper", "music", "story", "picture",
]  # fmt: skip


def texts(n: int, seed: int) -> list[str]:
    """``n`` distinct short sentences (8-20 words): chunks of a document, questions."""
    rng = random.Random(seed)
    return [
        f"{i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))) + "."
        for i in range(n)
    ]


async def _client(
    client: httpx.AsyncClient, url: str, rerank: bool, batches: list[list[str]]
) -> None:
    for batch in batches:
        if rerank:
            body: dict[str, Any] = {"query": "Which text is about a harbour?", "documents": batch}
            r = await client.post(f"{url}/v1/rerank", json=body)
            r.raise_for_status()
            assert len(r.json()["results"]) == len(batch)
        else:
            r = await client.post(f"{url}/v1/embeddings", json={"input": batch})
            r.raise_for_status()
            assert len(r.json()["data"]) == len(batch)


async def _turn(url: str, c: int, b: int, total: int, rerank: bool, seed: int) -> float:
    per_client = max(2, -(-total // (c * b)))
    pool = texts(c * per_client * b, seed)
    work = [
        [pool[(k * per_client + j) * b : (k * per_client + j + 1) * b] for j in range(per_client)]
        for k in range(c)
    ]
    limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(_client(client, url, rerank, w) for w in work))
        return len(pool) / (time.perf_counter() - t0)


def turn(url: str, c: int, b: int, total: int, rerank: bool, seed: int) -> float:
    """Texts per second of one turn."""
    return asyncio.run(_turn(url, c, b, total, rerank, seed))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF (default: all-MiniLM-L6-v2; with --rerank, a reranker)")
    ap.add_argument("--rerank", action="store_true", help="/v1/rerank instead of /v1/embeddings")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--batch", default="1,32,256", help="texts per request")
    ap.add_argument("--texts", type=int, default=512, help="texts per turn, at least")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--server-flags", default="", help="extra flags for both servers")
    ap.add_argument("--json", action="store_true", help="append the records to results/")
    add_llama_server_argument(ap)
    args = ap.parse_args()
    model = args.model or encoder_model(args.rerank)
    mode = ["--rerank"] if args.rerank else ["--embedding", "--pooling", "mean"]
    flags = ["-m", model, "-t", str(args.threads), *mode, *shlex.split(args.server_flags)]
    ours, ours_url = start([sys.executable, "-m", "pyllama.server", *flags])
    procs = [ours]
    rows = []
    try:
        theirs, theirs_url = start([args.llama_server, *flags, "--no-webui"])
        procs.append(theirs)
        for c in [int(x) for x in args.concurrency.split(",")]:
            for b in [int(x) for x in args.batch.split(",")]:
                best = {"pyllama": 0.0, "llama_server": 0.0}
                paired = []
                for rep in range(args.repeat):
                    got = {}
                    for name, url in (("pyllama", ours_url), ("llama_server", theirs_url)):
                        got[name] = turn(url, c, b, args.texts, args.rerank, rep)
                        best[name] = max(best[name], got[name])
                    paired.append(got["pyllama"] / got["llama_server"])
                row = {
                    "bench": "rerank" if args.rerank else "embeddings",
                    "date": time.strftime("%Y-%m-%d"),
                    "cpu": cpu_name(),
                    "model": Path(model).name,
                    "flags": " ".join(flags[2:]),
                    "concurrency": c,
                    "batch": b,
                    "pyllama_texts_per_s": round(best["pyllama"], 1),
                    "llama_server_texts_per_s": round(best["llama_server"], 1),
                    "ratio": round(best["pyllama"] / best["llama_server"], 3),
                    "ratio_median": round(statistics.median(paired), 3),
                    "repeat": args.repeat,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        for p in procs:
            stop(p)
    if args.json:
        append_results(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
