"""Plot bench_engine.py's JSON lines: engine vs llama-batched-bench tok/s per concurrency.

python benchmarks/bench_engine.py --json > results.jsonl
python benchmarks/plot_engine.py results.jsonl docs/img/engine_throughput.png
"""

from __future__ import annotations

import json
import sys


def main(src: str, dst: str) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(src) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    c = [r["concurrency"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot(c, [r["tok_per_s"] for r in rows], "o-", label="pyllama engine")
    ax.plot(c, [r["batched_bench_s_tg"] for r in rows], "s--", label="llama-batched-bench S_TG")
    for r in rows:
        ax.annotate(
            f"{r['ratio']:.2f}x",
            (r["concurrency"], r["tok_per_s"]),
            textcoords="offset points",
            xytext=(0, -14),
            ha="center",
            fontsize=8,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(c, [str(x) for x in c])
    ax.set_xlabel("concurrent sequences")
    ax.set_ylabel("aggregate decode tokens/s")
    r0 = rows[0]
    ax.set_title(
        f"SmolLM2-135M Q4_1, {r0['threads']} threads, {r0['prompt_tokens']}+{r0['gen_tokens']} tokens",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
