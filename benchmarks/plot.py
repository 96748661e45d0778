"""One chart for the benchmarks: ours vs the peer per concurrency, ratio labels."""

from __future__ import annotations

from typing import Any


def plot_pair(
    rows: list[dict[str, Any]],
    ours: tuple[str, str],
    theirs: tuple[str, str],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    dst: str,
    log2_x: bool = False,
) -> None:
    """``ours``/``theirs``: (row key, legend label); each row also has concurrency, ratio."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = [r["concurrency"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot(c, [r[ours[0]] for r in rows], "o-", label=ours[1])
    ax.plot(c, [r[theirs[0]] for r in rows], "s--", label=theirs[1])
    for r in rows:
        ax.annotate(
            f"{r['ratio']:.2f}x",
            (r["concurrency"], r[ours[0]]),
            textcoords="offset points",
            xytext=(0, -14),
            ha="center",
            fontsize=8,
        )
    if log2_x:
        ax.set_xscale("log", base=2)
    ax.set_xticks(c, [str(x) for x in c])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst)
