"""What N pyllama replicas on Ray Serve give: generated tokens/s and memory per replica.

A local Ray cluster of ``--nodes`` nodes (one CPU each, ``tests/helpers/ray_cluster.py``)
runs ``pyllama.serve.rayserve.build_app`` with 1, then 2 ... replicas (one per node, ``-t 1``
each); ``--clients`` clients send chats of ``--tokens`` generated tokens (EOS banned) through
Serve's proxy for ``--seconds``. Reported per replica count: generated tokens/s in all,
requests/s, and each replica process's resident memory (VmRSS) after the run.

    python benchmarks/bench_ray_capacity.py --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.ray_cluster import replica_pids, serve_on_local_cluster  # the tests' local cluster


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def client(url: str, until: float, tokens: int, i: int) -> tuple[int, int]:
    n_tok = n_req = 0
    async with httpx.AsyncClient(timeout=600) as c:
        while time.monotonic() < until:
            r = await c.post(
                f"{url}/v1/chat/completions",
                json={
                    "messages": [{"role": "user", "content": f"Tell me story {i}-{n_req}."}],
                    "max_tokens": tokens,
                    "ignore_eos": True,
                },
            )
            r.raise_for_status()
            n_tok += r.json()["usage"]["completion_tokens"]
            n_req += 1
    return n_tok, n_req


async def load(url: str, clients: int, seconds: float, tokens: int) -> tuple[int, int, float]:
    t0 = time.monotonic()
    done = await asyncio.gather(*(client(url, t0 + seconds, tokens, i) for i in range(clients)))
    return sum(d[0] for d in done), sum(d[1] for d in done), time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF (default: the demo model)")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--server-args", default="-c 8192 -np 4")
    ap.add_argument("--json", action="store_true", help="append the record to benchmarks/results")
    a = ap.parse_args()
    if a.model is None:
        from pyllama.models import demo_model

        a.model = demo_model()
    from ray import serve

    from pyllama.serve.rayserve import build_app

    record: dict[str, Any] = {
        "bench": "ray_capacity",
        "date": time.strftime("%Y-%m-%d"),
        "model": Path(a.model).name,
        "server_args": a.server_args,
        "clients": a.clients,
        "tokens": a.tokens,
        "seconds": a.seconds,
        "results": {},
    }
    with serve_on_local_cluster(nodes=a.nodes) as url:
        for n in range(1, a.nodes + 1):
            config = {
                "model": a.model,
                "replicas": n,
                "resources": {"slot": 1},
                "server_args": a.server_args,
            }
            serve.run(build_app(config), name="default", route_prefix="/")
            asyncio.run(load(url, 2, 3, 8))  # warm-up
            tok, req, wall = asyncio.run(load(url, a.clients, a.seconds, a.tokens))
            rss = [rss_mib(pid) for pid in replica_pids("pyllama-replica")]
            res = {
                "tokens_per_s": tok / wall,
                "requests_per_s": req / wall,
                "replica_rss_mib": rss,
            }
            record["results"][str(n)] = res
            print(
                f"{n} replica(s): {res['tokens_per_s']:.1f} generated tokens/s, "
                f"{res['requests_per_s']:.2f} requests/s, RSS MiB {[round(r) for r in rss]}",
                flush=True,
            )
            serve.delete("default")
    if a.json:
        out = Path(__file__).parent / "results" / f"ray_capacity_{record['date']}.jsonl"
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"appended to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
