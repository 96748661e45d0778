"""Per-task cost of short greedy tasks, host sampling vs `-bs` (backend sampling).

Attaching a sampler chain to a sequence makes llama.cpp reserve its scheduler again at the
next decode, so with `-bs` every task that attaches or detaches one pays it; the engine keeps
a finished task's greedy stage on its sequence for the slot's next greedy task. This runs
blocks of N sequential tasks of a few tokens each (host, -bs, host, -bs: alternating, one
engine) and prints the mean wall time per task of each block.

``--mixed``: greedy tasks pick in the graph by default on the CPU (``graph_greedy``), so a
slot that alternates greedy and sampled tasks attaches and detaches the greedy stage each
time; blocks of alternating tasks on an engine with the default and one with
``graph_greedy=False`` (default, host, default, host) show what that costs.

    python benchmarks/bench_task_overhead.py --model MODEL.gguf --tasks 150 --json
    python benchmarks/bench_task_overhead.py --model MODEL.gguf --mixed --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tasks", type=int, default=150, help="tasks per block")
    ap.add_argument("--tokens", type=int, default=2, help="tokens each task generates")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mixed", action="store_true", help="alternate greedy and sampled tasks")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from pyllama import _core
    from pyllama.engine import generate, make_task, open_engine
    from pyllama.sampling import make_sampling_params

    model = _core.Model(args.model, n_gpu_layers=0)
    if args.mixed:
        return mixed(args, model)
    eng = open_engine(model, n_parallel=args.parallel, n_ctx=4096, n_threads=args.threads)
    prompt = model.tokenize("Hello my name is", True, True)
    try:
        for block, backend in enumerate((False, True, False, True)):
            sampling = make_sampling_params(temperature=0)
            sampling.backend_sampling = backend
            t0 = time.perf_counter()
            for _ in range(args.tasks):
                list(generate(eng, make_task(prompt, n_predict=args.tokens, sampling=sampling)))
            ms = 1000.0 * (time.perf_counter() - t0) / args.tasks
            row = {"block": block, "mode": "bs" if backend else "host", "ms_per_task": round(ms, 2)}
            row.update(tasks=args.tasks, tokens=args.tokens, parallel=args.parallel)
            print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()))
    finally:
        eng.stop()
    return 0


def mixed(args: argparse.Namespace, model) -> int:
    from pyllama.engine import generate, make_task, open_engine
    from pyllama.sampling import make_sampling_params

    prompt = model.tokenize("Hello my name is", True, True)
    kinds = [make_sampling_params(temperature=0), make_sampling_params(temperature=0.8, seed=1)]
    for block, graph in enumerate((True, False, True, False)):
        eng = open_engine(
            model, n_parallel=args.parallel, n_ctx=4096, n_threads=args.threads, graph_greedy=graph
        )
        try:
            t0 = time.perf_counter()
            for i in range(args.tasks):
                task = make_task(prompt, n_predict=args.tokens, sampling=kinds[i % 2])
                list(generate(eng, task))
            ms = 1000.0 * (time.perf_counter() - t0) / args.tasks
        finally:
            eng.stop()
        row = {"block": block, "mode": "mixed, " + ("graph greedy" if graph else "host greedy")}
        row.update(ms_per_task=round(ms, 2), tasks=args.tasks, tokens=args.tokens)
        row["parallel"] = args.parallel
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
