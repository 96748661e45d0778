"""Plot a bench_shared_prefix.py record: docs/img/shared_prefix_ttft.png.

python benchmarks/plot_shared_prefix.py benchmarks/results/shared_prefix_DATE.jsonl [--record N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--record", type=int, default=-1, help="line of the file (default: last)")
    a = ap.parse_args()
    record = json.loads(Path(a.results).read_text().splitlines()[a.record])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"pyllama": "pyllama-server", "llama_server": "llama-server"}
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    width = 0.38
    for k, (name, reps) in enumerate(record["runs"].items()):
        n_waves = len(reps[0])
        # per wave: the median over repeats of the wave's TTFT p50
        p50 = [sorted(rep[w]["ttft_p50_s"] for rep in reps)[len(reps) // 2] for w in range(n_waves)]
        xs = [w + (k - 0.5) * width for w in range(n_waves)]
        bars = ax.bar(xs, p50, width, label=labels.get(name, name))
        ax.bar_label(bars, [f"{v:.2f}" for v in p50], fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(range(n_waves), ["1 (cold)"] + [str(w + 1) for w in range(1, n_waves)])
    ax.set_xlabel("wave of 8 chat requests sharing a ~1000-token system prompt")
    ax.set_ylabel("time to first token, p50 (s)")
    ax.set_title("Shared prompt prefix, SmolLM2-135M, -np 8 -t 2", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    dst = Path(__file__).resolve().parent.parent / "docs" / "img" / "shared_prefix_ttft.png"
    fig.savefig(dst)
    print(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
