"""Plot bench_host_bound.py's JSON lines: per mode, tokens/s of the engine, llama-batched
and llama-batched-bench per concurrency (left), and the engine's host µs per sequence per
step (right).

python benchmarks/bench_host_bound.py --json > results.jsonl
python benchmarks/plot_host_bound.py results.jsonl docs/img/host_bound.png
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
    # with --rounds: the first round's rows (the one with llama-batched), no summaries
    rows = [r for r in rows if not r.get("summary") and r.get("round", 0) == 0]
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, (ax, hx) = plt.subplots(1, 2, figsize=(10, 3.8), dpi=120)
    ceiling = {r["concurrency"]: r["batched_bench_s_tg"] for r in rows}
    cs = sorted(ceiling)
    ax.plot(cs, [ceiling[c] for c in cs], "k:", label="llama-batched-bench S_TG (no sampling)")
    for m in modes:
        mine = [r for r in rows if r["mode"] == m]
        c = [r["concurrency"] for r in mine]
        (line,) = ax.plot(c, [r["engine_tok_s"] for r in mine], "o-", label=f"engine, {m}")
        peer = [r for r in mine if "batched_tok_s" in r]
        if peer:
            ax.plot(
                [r["concurrency"] for r in peer],
                [r["batched_tok_s"] for r in peer],
                "s--",
                color=line.get_color(),
                alpha=0.6,
                label=f"llama-batched, {m}",
            )
        hx.plot(c, [r["host_us_per_seq_step"] for r in mine], "o-", label=m)
    for a in (ax, hx):
        a.set_xscale("log", base=2)
        a.set_xticks(cs, [str(x) for x in cs])
        a.set_xlabel("sequences")
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    r0 = rows[0]
    ax.set_ylabel("decode tokens/s")
    ax.set_title(
        f"tiny model (49,152 vocab), {r0['threads']} threads, {r0['gen_tokens']} tokens", fontsize=9
    )
    hx.set_ylabel("engine host µs per sequence per step")
    hx.set_title("loop thread's time outside llama_decode", fontsize=9)
    fig.tight_layout()
    fig.savefig(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
