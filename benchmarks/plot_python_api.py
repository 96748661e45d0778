"""Plot a bench_python_api.py record: docs/img/python_api_throughput.png.

python benchmarks/plot_python_api.py benchmarks/results/python_api_DATE.jsonl [--record N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plot import plot_pair


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument(
        "--record", type=int, default=-1, help="which line of the file (default: the last)"
    )
    a = ap.parse_args()
    record = json.loads(Path(a.results).read_text().splitlines()[a.record])
    best = record["best"]
    rows = []
    for key in best["pyllama"]:
        if key.startswith("c") and key[1:].isdigit():
            p, q = best["pyllama"][key], best["llama_cpp"][key]
            rows.append({"concurrency": int(key[1:]), "ours": p, "theirs": q, "ratio": p / q})
    dst = Path(__file__).resolve().parent.parent / "docs" / "img" / "python_api_throughput.png"
    plot_pair(
        rows,
        ("ours", "pyllama AsyncLlama"),
        ("theirs", "llama-cpp-python Llama (one compute thread)"),
        xlabel="concurrent callers in one process",
        ylabel="aggregate tokens/s",
        title="In-process API, SmolLM2-135M, 2 threads",
        dst=str(dst),
    )
    print(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
