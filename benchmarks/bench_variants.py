"""CPU builds side by side: the release wheel (its auto-picked variant and a named one), a
source build (portable or GGML_NATIVE), and llama-bench, each measured as llama-bench
measures: pp (one batch of N random tokens) and tg (N tokens decoded one at a time).

Each pyllama build is a Python interpreter (a venv where it is installed); each runs the
same measuring code in a child process. Rounds interleave the builds and the best of each
is kept: this machine's speed drifts between minutes.

    python benchmarks/bench_variants.py --threads 2 --rounds 3 \\
        --build "wheel=/tmp/venv-wheel/bin/python" \\
        --build "wheel haswell=/tmp/venv-wheel/bin/python:PYLLAMA_CPU_VARIANT=haswell" \\
        --build "native=/tmp/venv-native/bin/python" [--json out.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# runs inside each build's interpreter: prints {"variant", "pp", "tg"} (tokens per second)
CHILD = r"""
import json, random, sys, time
from pyllama import _core
from pyllama.hardware import cpu_variant
path, threads, n_pp, n_tg, repeat = sys.argv[1], *map(int, sys.argv[2:6])
_core.set_log_level(5)
model = _core.Model(path)
ctx = _core.Context(model, n_ctx=n_pp + n_tg + 16, n_batch=n_pp, n_ubatch=n_pp,
                    n_threads=threads, n_threads_batch=threads)
rng = random.Random(0)
vocab = model.n_vocab
def pp():
    ctx.memory_clear()
    batch = _core.Batch(n_pp)
    batch.add_sequence([model.token_bos] + [rng.randrange(vocab) for _ in range(n_pp - 1)], 0, 0)
    start = time.perf_counter()
    ctx.decode(batch)
    return n_pp / (time.perf_counter() - start)
def tg():
    ctx.memory_clear()
    batch = _core.Batch(1)
    token = model.token_bos
    start = time.perf_counter()
    for pos in range(n_tg):
        batch.clear()
        batch.add(token, pos, [0], True)
        ctx.decode(batch)
        token = rng.randrange(vocab)
    return n_tg / (time.perf_counter() - start)
pp(); tg()  # warm-up
print(json.dumps({"variant": cpu_variant(),
                  "pp": max(pp() for _ in range(repeat)),
                  "tg": max(tg() for _ in range(repeat))}))
"""


def run_build(python: str, env: dict[str, str], model: str, args: argparse.Namespace) -> dict:
    cmd = [python, "-c", CHILD, model, str(args.threads), str(args.pp), str(args.tg), "3"]
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),  # the installed package, not this checkout's source tree
        env={**os.environ, **env},
    )
    return json.loads(out.stdout)


def run_llama_bench(binary: str, model: str, args: argparse.Namespace) -> dict:
    """llama-bench's best pp and tg; its CPU flags are the ones it was built with."""
    cmd = [binary, "-m", model, "-t", str(args.threads), "-p", str(args.pp), "-n", str(args.tg)]
    cmd += ["-b", str(args.pp), "-ub", str(args.pp), "-r", "3", "-o", "json"]
    rows = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    best = {("pp" if r["n_prompt"] else "tg"): max(r["samples_ts"]) for r in rows}
    return {"variant": "(static build)", **best}


def parse_build(spec: str) -> tuple[str, str, dict[str, str]]:
    """'label=/path/python[:VAR=value,...]'"""
    label, _, rest = spec.partition("=")
    python, _, env = rest.partition(":")
    pairs = dict(kv.split("=", 1) for kv in env.split(",") if kv)
    return label, python, pairs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF (default: the demo model)")
    ap.add_argument("--build", action="append", default=[], help="label=python[:VAR=value]")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    default_bench = Path(os.environ.get("PYLLAMA_CACHE", Path.home() / ".cache/pyllama"))
    ap.add_argument(
        "--llama-bench",
        action="append",
        default=[],
        help="label=path of a llama-bench; the first is the ratios' reference "
        "(default: ci/build_peer.sh's, x86-64-v3)",
    )
    ap.add_argument("--json", help="append the results to this JSONL file")
    args = ap.parse_args()
    if args.model is None:
        from pyllama import demo_model

        args.model = demo_model()
    builds = [parse_build(b) for b in args.build]
    benches = [b.split("=", 1) for b in args.llama_bench] or [
        ["llama-bench", str(default_bench / "peer/bin/llama-bench")]
    ]
    best: dict[str, dict] = {}

    def keep_best(label: str, r: dict) -> None:
        b = best.setdefault(label, r)
        b["pp"], b["tg"] = max(b["pp"], r["pp"]), max(b["tg"], r["tg"])

    for _ in range(args.rounds):
        for label, python, env in builds:
            keep_best(label, run_build(python, env, args.model, args))
        for label, binary in benches:
            keep_best(label, run_llama_bench(binary, args.model, args))
    ref = best[benches[0][0]]
    print(f"| build | CPU variant | pp{args.pp} tok/s | tg{args.tg} tok/s | pp ratio | tg ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, r in best.items():
        print(
            f"| {label} | {r['variant']} | {r['pp']:.1f} | {r['tg']:.1f} "
            f"| {r['pp'] / ref['pp']:.3f} | {r['tg'] / ref['tg']:.3f} |"
        )
    if args.json:
        with open(args.json, "a") as f:
            for label, r in best.items():
                f.write(json.dumps({"build": label, "threads": args.threads, **r}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
