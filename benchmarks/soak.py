"""Soak one pyllama-server (not in CI): mixed requests from concurrent clients for a set time.

python benchmarks/soak.py --duration 1800 [--clients 6] [--fuzz-examples 2000]

One server on SmolLM2-135M (``pyllama.demo_model()``) with ``--embedding`` (the same model
answers chat, completions and embeddings), ``-np 4``. Each client loops over a weighted mix:
OpenAI chat (plain and streamed), /completion, /v1/embeddings, streams the client abandons
after three chunks, bad requests (a 4xx expected), Anthropic /v1/messages, Ollama /api/chat.
Optionally the fuzzer's long form (tests/server/test_fuzz.py) runs against the same server.
Every ``--every`` seconds it samples the server's RssAnon, open fds, threads and busy slots
into a JSONL (one sample per line, the summary last). Exit status 1 on any lost request
(no answer in time, a connection error, an unexpected status), on RssAnon growing more than
``--rss-bound-mb`` after the warm-up, on fds or threads growing past their bounds, or on a
fuzzer failure. Plot with ``benchmarks/plot_soak.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import start, stop

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 120.0
CHAT = [{"role": "user", "content": "Name a colour."}]
BAD: list[tuple[str, bytes, str]] = [  # path, body, content type: each must get a 4xx
    ("/v1/chat/completions", b"{not json", "application/json"),
    ("/v1/chat/completions", b'{"messages": null}', "application/json"),
    ("/v1/chat/completions", b'{"messages": [{"role": 123}]}', "application/json"),
    ("/completion", b'{"prompt": "x", "temperature": "hot"}', "application/json"),
    ("/completion", b'{"prompt": "x", "n_predict": -7}', "application/json"),
    ("/completion", b"[1, 2]", "application/json"),
    ("/v1/embeddings", b'{"input": "x"}', "text/plain"),
    ("/v1/messages", b'{"model": "m", "messages": []}', "application/json"),
    ("/api/chat", b'{"model": "m", "messages": "hi"}', "application/json"),
    ("/tokenize", b'{"content": "\xed\xa0\x80"}', "application/json"),
]
MIX = {  # kind: weight
    "chat": 4,
    "chat_stream": 3,
    "completion": 3,
    "embeddings": 3,
    "abandoned": 2,
    "bad": 2,
    "anthropic": 2,
    "ollama": 2,
}


class Lost(Exception):
    """A request that got no answer or not the one it should."""


async def _post(c: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = await c.post(path, json=body)
    if r.status_code != 200:
        raise Lost(f"{path} -> {r.status_code} {r.text[:200]}")
    return r.json()


async def _stream(c: httpx.AsyncClient, body: dict[str, Any], keep: int | None) -> None:
    """Stream a chat; ``keep``: close after that many chunks (an abandoned stream)."""
    async with c.stream("POST", "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            raise Lost(f"stream -> {r.status_code}")
        n = 0
        done = False
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                n += 1
                done = line == "data: [DONE]"
                if keep is not None and n >= keep:
                    return
        if keep is None and not done:
            raise Lost("stream ended without [DONE]")


async def one(c: httpx.AsyncClient, kind: str, rng: random.Random) -> None:
    n = rng.randint(1, 12)
    if kind == "chat":
        out = await _post(c, "/v1/chat/completions", {"messages": CHAT, "max_tokens": n})
        assert out["choices"][0]["message"] is not None
    elif kind == "chat_stream":
        await _stream(c, {"messages": CHAT, "max_tokens": n, "stream": True}, None)
    elif kind == "abandoned":
        await _stream(c, {"messages": CHAT, "max_tokens": 64, "stream": True}, 3)
    elif kind == "completion":
        out = await _post(c, "/completion", {"prompt": "Once upon a time", "n_predict": n})
        assert isinstance(out["content"], str)
    elif kind == "embeddings":
        inputs = ["a soak test"] * rng.randint(1, 4)
        out = await _post(c, "/v1/embeddings", {"input": inputs})
        assert len(out["data"]) == len(inputs)
    elif kind == "anthropic":
        body = {"model": "m", "max_tokens": n, "messages": CHAT}
        assert (await _post(c, "/v1/messages", body))["type"] == "message"
    elif kind == "ollama":
        body = {"model": "m", "messages": CHAT, "stream": False, "options": {"num_predict": n}}
        assert (await _post(c, "/api/chat", body))["done"] is True
    elif kind == "bad":
        path, content, ctype = rng.choice(BAD)
        r = await c.post(path, content=content, headers={"Content-Type": ctype})
        if not 400 <= r.status_code < 500 or "error" not in r.json():
            raise Lost(f"bad {path} {content!r} -> {r.status_code}")


async def client_loop(url: str, seed: int, until: float, counts: Counter, lost: list[str]) -> None:
    rng = random.Random(seed)
    kinds, weights = list(MIX), list(MIX.values())
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S) as c:
        while time.monotonic() < until:
            kind = rng.choices(kinds, weights)[0]
            try:
                await asyncio.wait_for(one(c, kind, rng), TIMEOUT_S)
                counts[kind] += 1
            except Exception as e:  # anything but the answer is a lost request
                counts["lost"] += 1
                lost.append(f"{kind}: {type(e).__name__}: {e}"[:300])


def proc_sample(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {
        "rss_anon_kb": int(fields["RssAnon"].split()[0]),
        "vm_rss_kb": int(fields["VmRSS"].split()[0]),
        "threads": int(fields["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


async def sampler(
    url: str, pid: int, t0: float, until: float, every: float, counts: Counter, out: Any
) -> list[dict[str, Any]]:
    samples = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        while True:
            s: dict[str, Any] = {"t_s": round(time.monotonic() - t0, 1), **proc_sample(pid)}
            try:
                slots = (await c.get("/slots")).json()
                s["busy_slots"] = sum(1 for x in slots if x.get("is_processing"))
            except (httpx.HTTPError, ValueError):
                s["busy_slots"] = None
            s["requests"] = sum(v for k, v in counts.items() if k != "lost")
            s["lost"] = counts["lost"]
            samples.append(s)
            out.write(json.dumps(s) + "\n")
            out.flush()
            if time.monotonic() >= until:
                return samples
            await asyncio.sleep(min(every, max(0.0, until - time.monotonic())))


async def fuzz(url: str, examples: int) -> int:
    env = {**os.environ, "PYLLAMA_FUZZ_URL": url, "PYLLAMA_FUZZ_EXAMPLES": str(examples)}
    test = str(ROOT / "tests/server/test_fuzz.py")
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test, env=env, cwd="/tmp"
    )
    return await p.wait()


def summarize(samples: list[dict[str, Any]], warmup_s: float, a: argparse.Namespace) -> dict:
    warm = [s for s in samples if s["t_s"] >= warmup_s] or samples[-1:]
    first, last = warm[0], samples[-1]
    growth = {
        "rss_anon_mb": (last["rss_anon_kb"] - first["rss_anon_kb"]) / 1024,
        "fds": last["fds"] - first["fds"],
        "threads": last["threads"] - first["threads"],
    }
    bounds = {"rss_anon_mb": a.rss_bound_mb, "fds": a.fd_bound, "threads": a.thread_bound}
    return {
        "rss_anon_mb": {
            "start": samples[0]["rss_anon_kb"] / 1024,
            "after_warmup": first["rss_anon_kb"] / 1024,
            "end": last["rss_anon_kb"] / 1024,
            "max": max(s["rss_anon_kb"] for s in samples) / 1024,
        },
        "fds": [min(s["fds"] for s in warm), max(s["fds"] for s in warm)],
        "threads": [min(s["threads"] for s in warm), max(s["threads"] for s in warm)],
        "growth_after_warmup": growth,
        "bounds": bounds,
        "over_bound": [k for k, v in growth.items() if v > bounds[k]],
    }


async def soak(a: argparse.Namespace, url: str, pid: int, out: Any) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    lost: list[str] = []
    t0 = time.monotonic()
    until = t0 + a.duration
    clients = [client_loop(url, a.seed + i, until, counts, lost) for i in range(a.clients)]
    fuzzing = [fuzz(url, a.fuzz_examples)] if a.fuzz_examples > 0 else []
    results = await asyncio.gather(
        sampler(url, pid, t0, until, a.every, counts, out), *clients, *fuzzing
    )
    samples = results[0]
    elapsed = time.monotonic() - t0
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        healthy = (await c.get("/health")).status_code == 200
    summary = {
        "summary": True,
        "duration_s": round(elapsed, 1),
        "clients": a.clients,
        "requests": sum(v for k, v in counts.items() if k != "lost"),
        "by_kind": dict(counts),
        "lost": counts["lost"],
        "lost_examples": lost[:10],
        "fuzz_examples": a.fuzz_examples,
        "fuzz_rc": results[-1] if fuzzing else None,
        "healthy_after": healthy,
        **summarize(samples, a.warmup, a),
    }
    summary["ok"] = (
        summary["lost"] == 0
        and not summary["over_bound"]
        and healthy
        and summary["fuzz_rc"] in (None, 0)
    )
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=1800.0, help="seconds of load")
    ap.add_argument("--clients", type=int, default=6, help="concurrent client tasks")
    ap.add_argument("-np", "--parallel", type=int, default=4)
    ap.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds before the baseline")
    ap.add_argument("--rss-bound-mb", type=float, default=64.0, help="RssAnon growth allowed")
    ap.add_argument("--fd-bound", type=int, default=16, help="open fd growth allowed")
    ap.add_argument("--thread-bound", type=int, default=8, help="thread growth allowed")
    ap.add_argument("--fuzz-examples", type=int, default=0, help="fuzzer cases per property")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / f"benchmarks/results/soak_{time.strftime('%F')}"))
    a = ap.parse_args()
    from pyllama import demo_model

    cmd = [sys.executable, "-m", "pyllama.server", "-m", demo_model(), "-t", "2", "-c", "4096"]
    cmd += ["-np", str(a.parallel), "--embedding", "--metrics", "--slots"]
    proc, url = start(cmd)
    path = Path(a.out).with_suffix(".jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with path.open("w") as out:
            summary = asyncio.run(soak(a, url, proc.pid, out))
            summary["alive"] = proc.poll() is None
            summary["ok"] = summary["ok"] and summary["alive"]
            out.write(json.dumps(summary) + "\n")
    finally:
        stop(proc)
    print(json.dumps(summary, indent=1))
    print(f"samples and summary: {path}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
