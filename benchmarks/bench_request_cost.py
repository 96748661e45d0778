"""The event loop's CPU time for one request: pyllama-server's app, driven in-process.

A one-input request (one text to embed, one document to rerank) is a few milliseconds of
compute, so the Python request path (routing, middleware, validation, tokenizing, the task
stream, the JSON answer) is a visible part of it: llama-server's C++ HTTP threads spend
about 0.3 ms a request. This calls the Starlette app ``create_app`` builds, with the real
model and engine, from the same thread's event loop (no socket, no uvicorn), and reads that
thread's CPU time (``time.thread_time``) around blocks of requests: the engine's own threads
are not counted. ``--profile`` adds a cProfile of one more block, by own time.

To compare two versions of the package (a change against its parent), run this with each on
``PYTHONPATH``, alternating, and compare the medians.

    python benchmarks/bench_request_cost.py [--route /v1/embeddings] [--requests 500]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import statistics
import time
from typing import Any

from servers import encoder_model

BODIES = {
    "/v1/embeddings": lambda i: {"input": [f"{i}: river harbour library museum orchard."]},
    "/embedding": lambda i: {"content": f"{i}: river harbour library museum orchard."},
    "/v1/rerank": lambda i: {"query": "a harbour?", "documents": [f"{i}: river harbour."]},
}


async def request(app: Any, path: str, body: bytes) -> int:
    """One POST through the ASGI app; its status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }
    finished = asyncio.Event()
    delivered = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()  # the client stays until the answer is out
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    finished.set()
    return status


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from pyllama.server.app import create_app
    from pyllama.server.cli import parse_args

    mode = ["--rerank"] if args.route == "/v1/rerank" else ["--embedding", "--pooling", "mean"]
    app = create_app(parse_args(["-m", args.model, "-t", str(args.threads), *mode]))
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    lifespan = asyncio.ensure_future(app({"type": "lifespan"}, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    await outbox.get()
    make = BODIES[args.route]
    bodies = [json.dumps(make(i)).encode() for i in range(args.requests)]
    deadline = time.monotonic() + 300
    while await request(app, args.route, bodies[0]) != 200:  # 503 while the model loads
        if time.monotonic() > deadline:
            raise SystemExit("the model did not load in 300 s")
        await asyncio.sleep(0.1)
    for body in bodies[:50]:  # warm: allocations, caches, the engine's first batches
        await request(app, args.route, body)
    per_block = []
    for _ in range(args.blocks):
        c0, t0 = time.thread_time(), time.perf_counter()
        for body in bodies:
            assert await request(app, args.route, body) == 200
        n = len(bodies)
        per_block.append(
            ((time.thread_time() - c0) / n * 1e3, (time.perf_counter() - t0) / n * 1e3)
        )
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for body in bodies:
            await request(app, args.route, body)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    await inbox.put({"type": "lifespan.shutdown"})
    await outbox.get()
    await lifespan
    return {
        "bench": "request_cost",
        "date": time.strftime("%Y-%m-%d"),
        "route": args.route,
        "model": args.model.rsplit("/", 1)[-1],
        "requests": args.requests,
        "blocks": args.blocks,
        "loop_cpu_ms": round(statistics.median(c for c, _ in per_block), 3),
        "wall_ms": round(statistics.median(w for _, w in per_block), 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF (default: all-MiniLM-L6-v2; a reranker for /v1/rerank)")
    ap.add_argument("--route", default="/v1/embeddings", choices=sorted(BODIES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=500, help="requests a block")
    ap.add_argument("--blocks", type=int, default=3, help="blocks; the medians are reported")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one more block")
    args = ap.parse_args()
    if args.model is None:
        args.model = encoder_model(rerank=args.route == "/v1/rerank")
    try:
        import uvloop  # what pyllama-server runs on where it is installed

        result = uvloop.run(run(args))
    except ImportError:
        result = asyncio.run(run(args))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
