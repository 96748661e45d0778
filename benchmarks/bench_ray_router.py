"""Prefix-affinity router vs Ray Serve's default router, two pyllama replicas on two nodes.

A local two-node Ray cluster (one CPU each, ``tests/helpers/ray_cluster.py``) runs
``pyllama.serve.rayserve.build_app`` with two replicas, once per router, fresh each time.
The workload is groups of chats: every chat of a group starts with the group's long system
prompt (about ``--system-tokens`` tokens) and asks its own question. Chats arrive open-loop
(Poisson, ``--rates`` per second, each from a group drawn at random with ``--seed``), as
users of several applications do. With ``-np 4`` a replica keeps four system prompts in its
slots: at ``--loads 2`` (light) either replica holds every group; at 8 groups (realistic)
the groups' prefixes together exceed one replica's cache, and only a router that keeps
each group on one replica finds them cached. Reported per router and load: time to first
token p50 and p90 (client-measured, over every chat but each group's first, which is cold
for every router) and the prefix-cache hit rate (cached prompt tokens / prompt tokens,
from each answer's usage). ``--ingress 1,2`` runs each router behind one and then two ingress
replicas (their routers share what the replicas report); ``--cache-ram`` in
``--server-args`` sets the replicas' host prompt cache (llama-server's default, 8192 MiB,
when absent; 0 turns it off).

    python benchmarks/bench_ray_router.py --server-args "-c 16384 -np 4 --cache-ram 0" --json
    python benchmarks/bench_ray_router.py --loads 8 --rates 0.5 --routers prefix --ingress 1,2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.ray_cluster import serve_on_local_cluster  # the tests' local cluster

TOPICS = [
    "harbour bakery", "mountain railway", "city library", "river ferry", "orchard farm",
    "night clinic", "ski school", "bicycle shop", "museum of clocks", "tea house",
    "chess club", "village post office",
]  # fmt: skip


def system_prompt(topic: str, tokens: int) -> str:
    rule = (
        f"You answer questions for the {topic}. Be polite and brief, answer in English, "
        "never invent prices or times, and ask again when a question is unclear. "
    )
    n = max(1, round(tokens / 40))  # a rule is about 40 tokens
    return "".join(f"Rule {i + 1} of the {topic}. {rule}" for i in range(n))


async def one_chat(client: httpx.AsyncClient, url: str, system: str, question: str) -> dict:
    body = {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    ttft = None
    usage: dict[str, Any] = {}
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        assert r.status_code == 200, await r.aread()
        replica = r.headers.get("x-pyllama-replica", "")
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if ttft is None and any(c["delta"].get("content") for c in chunk.get("choices", [])):
                ttft = time.perf_counter() - t0
            usage = chunk.get("usage") or usage
    return {
        "ttft_s": ttft if ttft is not None else time.perf_counter() - t0,
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
        "replica": replica,
    }


async def workload(
    url: str, groups: int, n: int, rate: float, tokens: int, seed: int
) -> list[dict]:
    """Open-loop arrivals: ``n`` chats at ``rate`` per second (Poisson), each from a group
    drawn at random; requests do not wait for each other, as users of several apps don't."""
    rng = random.Random(seed)
    systems = [system_prompt(TOPICS[g], tokens) for g in range(groups)]
    seen: set[int] = set()
    tasks = []
    async with httpx.AsyncClient(timeout=900, limits=httpx.Limits(max_connections=None)) as c:
        for i in range(n):
            g = rng.randrange(groups)
            first = g not in seen
            seen.add(g)

            async def run(g: int = g, i: int = i, first: bool = first) -> dict:
                rec = await one_chat(c, url, systems[g], f"Question {i}: what should I know?")
                return {**rec, "group": TOPICS[g], "index": 0 if first else 1 + i}

            tasks.append(asyncio.ensure_future(run()))
            await asyncio.sleep(rng.expovariate(rate))
        return list(await asyncio.gather(*tasks))


def summarize(recs: list[dict]) -> dict:
    warm = [r for r in recs if r["index"] > 0]
    prompt = sum(r["prompt_tokens"] for r in warm)
    return {
        "requests": len(recs),
        "ttft_p50_s": statistics.median(r["ttft_s"] for r in warm),
        "ttft_p90_s": statistics.quantiles([r["ttft_s"] for r in warm], n=10)[-1],
        "prefix_hit_rate": sum(r["cached_tokens"] for r in warm) / prompt if prompt else 0.0,
        "replicas_per_group": statistics.mean(
            len({r["replica"] for r in warm if r["group"] == g}) for g in {r["group"] for r in warm}
        ),
    }


def deploy(model: str, router: str, server_args: str, ingress: int) -> None:
    from ray import serve

    from pyllama.serve.rayserve import build_app

    serve.run(
        build_app(
            {
                "model": model,
                "replicas": 2,
                "resources": {"slot": 1},
                "router": router,
                "server_args": server_args,
                "ingress_replicas": ingress,
            }
        ),
        name="default",
        route_prefix="/",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF (default: the demo model)")
    ap.add_argument("--loads", default="2,8", help="group counts to run (light,realistic)")
    ap.add_argument("--rates", default="0.3,0.5", help="chats per second, one per load")
    ap.add_argument("--requests", type=int, default=80, help="chats per run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--system-tokens", type=int, default=1000)
    ap.add_argument("--server-args", default="-c 16384 -np 4 --cache-ram 0")
    ap.add_argument("--routers", default="default,prefix")
    ap.add_argument("--ingress", default="2", help="ingress replica counts to run, e.g. 1,2")
    ap.add_argument("--json", action="store_true", help="append the record to benchmarks/results")
    a = ap.parse_args()
    if a.model is None:
        from pyllama.models import demo_model

        a.model = demo_model()
    from ray import serve

    from pyllama.serve.rayserve.app import ServeArgs

    record: dict[str, Any] = {
        "bench": "ray_router",
        "date": time.strftime("%Y-%m-%d"),
        "model": Path(a.model).name,
        "server_args": a.server_args,
        "system_tokens": a.system_tokens,
        "requests": a.requests,
        "seed": a.seed,
        "cluster": "2 local Ray nodes x 1 CPU, 2 replicas (-t 1 each)",
        "ingress": a.ingress,
        # the router's near-tie rule (pyllama.serve.placement), as deployed
        "balance": ServeArgs.model_fields["balance"].default,
        "results": {},
    }
    ingresses = [int(n) for n in a.ingress.split(",")]
    with serve_on_local_cluster(nodes=2) as url:
        loads = zip(a.loads.split(","), a.rates.split(","))
        for groups, rate in ((int(g), float(r)) for g, r in loads):
            for router in a.routers.split(","):
                for ingress in ingresses:
                    # fresh replicas: empty caches
                    deploy(a.model, router, a.server_args, ingress)
                    recs = asyncio.run(
                        workload(url, groups, a.requests, rate, a.system_tokens, a.seed)
                    )
                    s = summarize(recs)
                    key = f"{groups} groups/{router}"
                    key += f"/{ingress} ingress" if len(ingresses) > 1 else ""
                    record["results"][key] = {
                        **s,
                        "rate": rate,
                        "ingress_replicas": ingress,
                        "raw": recs,
                    }
                    print(
                        f"{groups} groups at {rate}/s, {router:8s} router, {ingress} ingress:"
                        f" TTFT p50 {s['ttft_p50_s']:.3f} s p90 {s['ttft_p90_s']:.3f} s,"
                        f" prefix hits {s['prefix_hit_rate']:.0%},"
                        f" replicas per group {s['replicas_per_group']:.2f}",
                        flush=True,
                    )
                    serve.delete("default")
    if a.json:
        out = Path(__file__).parent / "results" / f"ray_router_{record['date']}.jsonl"
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"appended to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
