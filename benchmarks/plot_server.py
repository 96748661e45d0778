"""Plot bench_server.py's JSON lines: pyllama-server vs llama-server streaming tok/s.

python benchmarks/plot_server.py results.jsonl docs/img/server_throughput.png
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
    ax.plot(c, [r["pyllama_tok_per_s"] for r in rows], "o-", label="pyllama-server")
    ax.plot(c, [r["llama_server_tok_per_s"] for r in rows], "s--", label="llama-server")
    for r in rows:
        ax.annotate(
            f"{r['ratio']:.2f}x",
            (r["concurrency"], r["pyllama_tok_per_s"]),
            textcoords="offset points",
            xytext=(0, -14),
            ha="center",
            fontsize=8,
        )
    ax.set_xlabel("concurrent streaming clients")
    ax.set_ylabel("aggregate tokens/s")
    ax.set_xticks(c)
    ax.set_title("SmolLM2-135M Q4_1, -t 2 -c 16384 -np 8, 128 tokens each", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
