"""Plot bench_server.py's JSON lines: pyllama-server vs llama-server streaming tok/s.

python benchmarks/plot_server.py results.jsonl docs/img/server_throughput.png
"""

from __future__ import annotations

import json
import sys

from plot import plot_pair


def main(src: str, dst: str) -> int:
    with open(src) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    plot_pair(
        rows,
        ("pyllama_tok_per_s", "pyllama-server"),
        ("llama_server_tok_per_s", "llama-server"),
        xlabel="concurrent streaming clients",
        ylabel="aggregate tokens/s",
        title=f"SmolLM2-135M Q4_1, -t 2 -c 16384 -np 8, {rows[0]['gen_tokens']} tokens each",
        dst=dst,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
