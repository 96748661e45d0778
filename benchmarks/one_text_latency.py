"""One text a request, one client: where the time goes between the engine and the HTTP server.

Four ways to embed the same short texts one after the other, taken in turns: ``engine``,
``AsyncEngine`` in this process (tokenize, submit, ``TaskStream.rest()``, the vector as a
list) on uvloop; ``pyllama``, pyllama-server over one keep-alive connection; ``bare``, the
same package behind ``bare_embeddings_server.py``'s handler (uvicorn and the engine, no
Starlette layers); ``llama_server``, the peer over one connection (reopened when it closes
one, as cpp-httplib does every 100 requests). The client is a blocking socket with the
request written in one send, so that it costs each server the same little. Reported per
turn: milliseconds a request (mean and median) for each.

``--block N`` cuts each turn into blocks of N requests taken in a shuffled rotation, so that
the VM's drift (the engine alone moves by milliseconds between turns a minute apart) falls
on all four alike; a block's first ``SETTLE`` requests are not counted (the previous one's
OpenMP workers still spin for a while after its last decode).

    python benchmarks/one_text_latency.py --llama-server ~/.cache/pyllama/peer-native/bin/llama-server
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from servers import (
    add_llama_server_argument,
    append_results,
    cpu_name,
    encoder_model,
    start,
    stop,
)

FLAGS = ["-t", "2", "--embedding", "--pooling", "mean"]
SETTLE = 3  # requests at the start of a --block not counted


def text(i: int) -> str:
    return f"{i}: river harbour library museum orchard station garden market bridge."


class Connection:
    """HTTP/1.1 over one socket: a POST's answer body, reconnecting when the server closes."""

    def __init__(self, url: str) -> None:
        host, port = url.rsplit("//", 1)[1].split(":")
        self.address = (host, int(port))
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def post(self, path: str, body: bytes) -> bytes:
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        self.sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.sock.recv(65536)
        raw, rest = data.split(b"\r\n\r\n", 1)
        fields = dict(
            line.split(b":", 1) for line in raw.lower().split(b"\r\n")[1:] if b":" in line
        )
        length = int(fields[b"content-length"])
        while len(rest) < length:
            rest += self.sock.recv(65536)
        if fields.get(b"connection", b"").strip() == b"close":
            self.sock.close()
            self.sock = self._connect()
        return rest


def over_http(url: str, n: int, start_at: int) -> list[float]:
    conn = Connection(url)
    times = []
    for i in range(start_at, start_at + n):
        body = json.dumps({"input": [text(i)]}).encode()
        t0 = time.perf_counter()
        conn.post("/v1/embeddings", body)
        times.append(time.perf_counter() - t0)
    conn.sock.close()
    return times


class InProcess:
    """The engine's side alone: an engine loaded once in this process, a turn on uvloop."""

    def __init__(self, model_path: str) -> None:
        from pyllama import _core
        from pyllama.engine import AsyncEngine, open_engine

        self.model = _core.Model(model_path)
        engine = open_engine(self.model, n_threads=2, embeddings=True, pooling=1, n_ctx=512)
        self.engine = AsyncEngine(engine)

    async def _one(self, i: int) -> None:
        from pyllama import _core

        task = _core.TaskParams()
        task.kind = _core.TaskKind.EMBEDDING
        task.prompt = self.model.tokenize_prompt(text(i))
        task.embd_normalize = 2
        [stream] = self.engine.submit_many([task])
        events = await stream.rest()
        stream.close()
        events[-1].embedding  # noqa: B018 - the list a server would serialize

    async def _turn(self, n: int, start_at: int) -> list[float]:
        times = []
        for i in range(start_at, start_at + n):
            t0 = time.perf_counter()
            await self._one(i)
            times.append(time.perf_counter() - t0)
        return times

    def turn(self, n: int, start_at: int) -> list[float]:
        import uvloop

        return uvloop.run(self._turn(n, start_at))


def rotated(
    runs: dict[str, Callable[[int, int], list[float]]], n: int, block: int, start_at: int
) -> dict[str, list[float]]:
    """n requests each, in blocks of ``block`` taken in a shuffled order each round."""
    got: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(max(1, n // block)):
        order = list(runs)
        random.shuffle(order)
        for name in order:
            got[name] += runs[name](block, start_at + r * block)[SETTLE:]
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF (default: all-MiniLM-L6-v2)")
    ap.add_argument("--requests", type=int, default=800, help="a turn's requests")
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--block", type=int, default=0, help="rotate in blocks of N (0: whole turns)")
    ap.add_argument("--json", action="store_true", help="append the records to results/")
    add_llama_server_argument(ap)
    args = ap.parse_args()
    if args.block and args.block <= SETTLE:
        ap.error(f"--block must be above {SETTLE}: a block's first {SETTLE} are not counted")
    model = args.model or encoder_model()
    flags = ["-m", model, *FLAGS]
    ours, ours_url = start([sys.executable, "-m", "pyllama.server", *flags])
    procs = [ours]
    rows = []
    try:
        bare = Path(__file__).with_name("bare_embeddings_server.py")
        plain, plain_url = start([sys.executable, str(bare), *flags])
        procs.append(plain)
        theirs, theirs_url = start([args.llama_server, *flags, "--no-webui"])
        procs.append(theirs)
        engine = InProcess(model)  # the servers idle while it runs, and it while they do
        runs = {
            "engine": engine.turn,
            "pyllama": lambda n, at: over_http(ours_url, n, at),
            "bare": lambda n, at: over_http(plain_url, n, at),
            "llama_server": lambda n, at: over_http(theirs_url, n, at),
        }
        for k in range(args.turns):
            at = k * args.requests
            if args.block:
                got = rotated(runs, args.requests, args.block, at)
            else:
                got = {name: run(args.requests, at) for name, run in runs.items()}
            row = {
                "bench": "one_text_latency",
                "date": time.strftime("%Y-%m-%d"),
                "cpu": cpu_name(),
                "model": Path(model).name,
                "turn": k,
                "block": args.block,
            }
            for name, times in got.items():
                row[f"{name}_ms_mean"] = round(1e3 * statistics.fmean(times), 3)
                row[f"{name}_ms_p50"] = round(1e3 * statistics.median(times), 3)
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
