"""Plot bench_host_bound.py's ``--rounds`` summaries: per mode, the median of the paired
ratios to llama-batched-bench against sequences, with their range, for one or more runs.

python benchmarks/bench_host_bound.py --rounds 5 --json > after.jsonl
python benchmarks/plot_paired_ratios.py docs/img/paired.png "before=before.jsonl" "after=after.jsonl"
"""

from __future__ import annotations

import json
import sys


def summaries(path: str) -> list[dict]:
    with open(path) as f:
        return [r for r in map(json.loads, (x for x in f if x.startswith("{"))) if r.get("summary")]


def main(dst: str, runs: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loaded = [(label, summaries(path)) for label, path in (run.split("=", 1) for run in runs)]
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=120)
    styles = ["--", "-", ":", "-."]
    for k, (label, rows) in enumerate(loaded):
        for m, color in zip(dict.fromkeys(r["mode"] for r in rows), ["C0", "C1", "C2", "C3"]):
            mine = sorted((r for r in rows if r["mode"] == m), key=lambda r: r["concurrency"])
            c = [r["concurrency"] for r in mine]
            med = [r["ratio_batched_bench_median"] for r in mine]
            err = [
                [x - r["ratio_batched_bench_min"] for x, r in zip(med, mine)],
                [r["ratio_batched_bench_max"] - x for x, r in zip(med, mine)],
            ]
            ax.errorbar(
                c, med, yerr=err, fmt="o" + styles[k % 4], color=color, capsize=3,
                alpha=0.5 if k < len(runs) - 1 else 1.0, label=f"{m}, {label}",
            )  # fmt: skip
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(0.95, color="k", lw=0.8, ls=":")
    cs = sorted({r["concurrency"] for _, rows in loaded for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(cs, [str(x) for x in cs])
    ax.set_xlabel("sequences")
    ax.set_ylabel("engine / llama-batched-bench S_TG")
    r0 = loaded[-1][1][0]
    ax.set_title(
        f"median of {r0['rounds']} paired rounds (bars: range), {r0['threads']} threads",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
