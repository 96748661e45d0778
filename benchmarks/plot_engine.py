"""Plot bench_engine.py's JSON lines: engine vs llama-batched-bench tok/s per concurrency.

python benchmarks/bench_engine.py --json > results.jsonl
python benchmarks/plot_engine.py results.jsonl docs/img/engine_throughput.png
"""

from __future__ import annotations

import json
import sys

from plot import plot_pair


def main(src: str, dst: str) -> int:
    with open(src) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    r0 = rows[0]
    plot_pair(
        rows,
        ("tok_per_s", "pyllama engine"),
        ("batched_bench_s_tg", "llama-batched-bench S_TG"),
        xlabel="concurrent sequences",
        ylabel="aggregate decode tokens/s",
        title=f"SmolLM2-135M Q4_1, {r0['threads']} threads, "
        f"{r0['prompt_tokens']}+{r0['gen_tokens']} tokens",
        dst=dst,
        log2_x=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
