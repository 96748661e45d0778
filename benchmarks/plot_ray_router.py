"""Plot a bench_ray_router.py record: docs/img/ray_router_ttft.png.

python benchmarks/plot_ray_router.py benchmarks/results/ray_router_DATE.jsonl [--records=-2,-1]

Several records (lines of the file) are merged: a load run alone (``--loads 2``) and another
(``--loads 8``) make one plot.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--records", default="-1", help="lines of the file (default: the last)")
    a = ap.parse_args()
    lines = Path(a.results).read_text().splitlines()
    records = [json.loads(lines[int(i)]) for i in a.records.split(",")]
    record = {**records[-1], "results": {}}
    for r in records:
        record["results"].update(r["results"])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = sorted({k.split("/")[0] for k in record["results"]}, key=lambda k: int(k.split()[0]))
    routers = ["default", "prefix"]
    labels = {"default": "Serve's default router", "prefix": "pyllama prefix-affinity router"}
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    width = 0.38

    def row(load: str, router: str) -> dict:
        """The run of ``router`` at ``load``: behind the most ingress replicas measured."""
        keys = [k for k in record["results"] if k == f"{load}/{router}"]
        keys += sorted(k for k in record["results"] if k.startswith(f"{load}/{router}/"))
        return record["results"][keys[-1]]

    for k, router in enumerate(routers):
        rows = [row(load, router) for load in loads]
        xs = [i + (k - 0.5) * width for i in range(len(loads))]
        bars = ax.bar(xs, [r["ttft_p50_s"] for r in rows], width, label=labels[router])
        ax.bar_label(
            bars,
            [f"{r['ttft_p50_s']:.2f} s\n{r['prefix_hit_rate']:.0%} hits" for r in rows],
            fontsize=7,
        )
    ax.set_yscale("log")
    rates = [row(load, "prefix").get("rate") for load in loads]
    ax.set_xticks(
        range(len(loads)), [f"{load} of chats, {rate}/s" for load, rate in zip(loads, rates)]
    )
    ax.set_ylabel("time to first token, p50 (s)")
    ax.set_title(
        f"2 replicas on 2 Ray nodes, {record['model']}, {record['server_args']}", fontsize=8
    )
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    out = Path(__file__).resolve().parents[1] / "docs" / "img" / "ray_router_ttft.png"
    fig.savefig(out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
