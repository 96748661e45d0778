"""Waves of chat requests sharing a long system prompt: pyllama-server vs llama-server.

Both servers start with the same flags (default ``-np 8 -c 32768 -t 2``) and take turns.
A wave is N chat requests sent at once, each with the same system prompt of about
``--system-tokens`` tokens and its own question, streaming ``--gen-tokens`` greedy
tokens. The first wave meets empty caches (llama-server evaluates the system prompt once
per slot; pyllama-server once, and the other slots copy it); the second wave repeats the
questions (each slot's own cache serves it on both), and so on for ``--waves``. Per
wave: time to first token p50 and max, and wall time. Each side gets a fresh server per
repeat, so every first wave is a cold one. Reported: the first wave's best repeat, and the
median over every later wave of every repeat (short waves: one is noise).

    python benchmarks/bench_shared_prefix.py --repeat 2 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from servers import add_llama_server_argument, start, stop

RULE = (
    "You are the assistant of a small bakery by the harbour. Answer politely and briefly, "
    "in English, and never invent prices. The bakery opens at seven and closes at six, "
    "sells bread, cakes and pastries, delivers within the town and has a car park. "
)
QUESTIONS = [
    "What time do you open?",
    "Do you sell rye bread?",
    "Is there parking nearby?",
    "Can I order a birthday cake?",
    "Do you have anything gluten free?",
    "Where exactly are you?",
    "Do you deliver on Sundays?",
    "What is your best pastry?",
    "Can I pay by card?",
    "Do you bake croissants every day?",
    "Are your cakes made with butter?",
    "Can I reserve bread for tomorrow?",
    "Do you sell coffee?",
    "Is the shop open on holidays?",
    "Do you make wedding cakes?",
    "How long does a delivery take?",
]


def system_prompt(tokens: int) -> str:
    n = max(1, round(tokens / 55))  # the rule is about 55 tokens long
    return "".join(f"Rule {i + 1}. {RULE}" for i in range(n))


async def one(client: httpx.AsyncClient, url: str, system: str, q: str, g: int) -> dict:
    body = {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
        "max_tokens": g,
        "temperature": 0,
        "stream": True,
    }
    t0 = time.perf_counter()
    first = None
    text = ""
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for ch in json.loads(line[6:]).get("choices", []):
                piece = ch.get("delta", {}).get("content")
                if piece:
                    first = first or time.perf_counter()
                    text += piece
    end = time.perf_counter()
    return {"ttft": (first or end) - t0, "end": end, "t0": t0, "text": text}


async def wave(url: str, system: str, questions: list[str], g: int) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=900) as client:
        t0 = time.perf_counter()
        rs = await asyncio.gather(*[one(client, url, system, q, g) for q in questions])
    ttft = sorted(r["ttft"] for r in rs)
    return {
        "ttft_p50_s": statistics.median(ttft),
        "ttft_max_s": ttft[-1],
        "wall_s": max(r["end"] for r in rs) - t0,
        "texts": [r["text"] for r in rs],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx-size", type=int, default=32768)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--clients", type=int, default=8, help="requests per wave")
    ap.add_argument("--system-tokens", type=int, default=1000)
    ap.add_argument("--gen-tokens", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--waves", type=int, default=4, help="the first cold, the others cached")
    ap.add_argument(
        "--pyllama-flags", default="", help="extra pyllama-server flags, e.g. --no-prefix-share"
    )
    ap.add_argument("--json", action="store_true")
    add_llama_server_argument(ap)
    a = ap.parse_args()
    from pyllama import demo_model

    model = a.model or demo_model()
    flags = ["-m", model, "-t", str(a.threads), "-c", str(a.ctx_size), "-np", str(a.parallel)]
    sides = {
        "pyllama": [sys.executable, "-m", "pyllama.server", *flags, *a.pyllama_flags.split()],
        "llama_server": [a.llama_server, *flags, "--no-webui"],
    }
    system = system_prompt(a.system_tokens)
    questions = [QUESTIONS[i % len(QUESTIONS)] + f" ({i})" * (i >= len(QUESTIONS)) for i in range(a.clients)]  # fmt: skip
    runs: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in sides}
    for _ in range(a.repeat):
        for name, cmd in sides.items():
            proc, url = start(cmd)
            try:
                waves = [
                    asyncio.run(wave(url, system, questions, a.gen_tokens)) for _ in range(a.waves)
                ]
            finally:
                stop(proc)
            runs[name].append(waves)
            print(name, [round(w["ttft_p50_s"], 2) for w in waves], file=sys.stderr, flush=True)

    def cold(name: str) -> dict[str, Any]:
        return min((rep[0] for rep in runs[name]), key=lambda r: r["ttft_p50_s"])

    def cached(name: str) -> dict[str, float]:
        later = [w for rep in runs[name] for w in rep[1:]]
        return {k: statistics.median(w[k] for w in later) for k in ("ttft_p50_s", "ttft_max_s", "wall_s")}  # fmt: skip

    best = {name: [cold(name), cached(name)] for name in runs}
    print(
        "| wave | pyllama TTFT p50 / max s | llama-server TTFT p50 / max s | p50 ratio | wall s |"
    )
    print("| --- | --- | --- | --- | --- |")
    for w, label in enumerate(("first (cold), best", "later (cached), median")):
        p, q = best["pyllama"][w], best["llama_server"][w]
        print(
            f"| {label} | {p['ttft_p50_s']:.2f} / {p['ttft_max_s']:.2f} | "
            f"{q['ttft_p50_s']:.2f} / {q['ttft_max_s']:.2f} | "
            f"{p['ttft_p50_s'] / q['ttft_p50_s']:.2f} | {p['wall_s']:.1f} vs {q['wall_s']:.1f} |"
        )
    same = sum(x == y for x, y in zip(best["pyllama"][0]["texts"], best["llama_server"][0]["texts"]))  # fmt: skip
    print(f"first-wave answers identical to llama-server's: {same} of {len(questions)}")
    if a.json:
        out = Path(__file__).parent / "results" / f"shared_prefix_{time.strftime('%Y-%m-%d')}.jsonl"
        with out.open("a") as f:
            f.write(json.dumps({"args": vars(a), "runs": runs, "best": best}) + "\n")
        print(f"raw: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
