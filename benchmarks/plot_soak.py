"""Plot a soak.py run: docs/img/soak_rss.png (RssAnon, open fds and threads over time).

python benchmarks/plot_soak.py benchmarks/results/soak_DATE.jsonl [--out docs/img/soak_rss.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--out", default=str(ROOT / "docs/img/soak_rss.png"))
    a = ap.parse_args()
    lines = [json.loads(x) for x in Path(a.results).read_text().splitlines() if x.strip()]
    samples = [x for x in lines if not x.get("summary")]
    summary = next((x for x in lines if x.get("summary")), {})
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s["t_s"] / 60 for s in samples]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 4.5), dpi=120, sharex=True)
    top.plot(minutes, [s["rss_anon_kb"] / 1024 for s in samples], label="RssAnon")
    top.set_ylabel("MiB")
    top.set_ylim(bottom=0)
    top.legend(fontsize=8)
    bottom.plot(minutes, [s["fds"] for s in samples], label="open fds")
    bottom.plot(minutes, [s["threads"] for s in samples], label="threads")
    bottom.set_xlabel("minutes")
    bottom.set_ylim(bottom=0)
    bottom.legend(fontsize=8)
    title = "pyllama-server soak, SmolLM2-135M, -np 4 -t 2"
    if summary:
        title += f": {summary['requests']} requests, {summary['lost']} lost"
    top.set_title(title, fontsize=9)
    fig.tight_layout()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
