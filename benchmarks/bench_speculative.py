"""Speculative decoding on a copying task: pyllama-server and llama-server, same flags.

For each decoder (none, n-gram kinds, a draft model), both servers are started alike and
take turns, R times: one client asks for a passage to be copied (greedy, G tokens, the
prompt cache off so each turn does the same work). Per side: generation tokens/s (from
the response's timings), drafted and accepted tokens. The ratio is pyllama's best turn
over llama-server's best turn.

    python benchmarks/bench_speculative.py --threads 2 --json
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import httpx
from servers import add_llama_server_argument, start, stop

PASSAGE = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
    "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it "
    "was the season of Light, it was the season of Darkness, it was the spring of hope, it "
    "was the winter of despair."
)
DECODERS: dict[str, list[str]] = {
    "none": [],
    "ngram-mod (--spec-default)": ["--spec-default"],
    "ngram-simple": ["--spec-type", "ngram-simple"],
    "ngram-map-k": ["--spec-type", "ngram-map-k"],
    "draft model (itself, n_max 8)": [
        "-md", "{model}", "--spec-type", "draft-simple", "--spec-draft-n-max", "8",
    ],
}  # fmt: skip


def turn(url: str, g: int) -> dict[str, float]:
    body = {
        "prompt": f"Copy this passage exactly.\n\n{PASSAGE}\n\nCopy:\n\n{PASSAGE}\n\nAgain:\n\n",
        "n_predict": g,
        "temperature": 0,
        "cache_prompt": False,
    }
    t = httpx.post(url + "/completion", json=body, timeout=600).json()["timings"]
    return {
        "tok_per_s": t["predicted_per_second"],
        "draft_n": t.get("draft_n", 0),
        "draft_n_accepted": t.get("draft_n_accepted", 0),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen-tokens", type=int, default=96)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    add_llama_server_argument(ap)
    args = ap.parse_args()
    from pyllama import demo_model

    model = args.model or demo_model()
    base = ["-m", model, "-t", str(args.threads), "-c", "4096", "-np", "1"]
    for name, extra in DECODERS.items():
        flags = [*base, *(f.format(model=model) for f in extra)]
        ours, ours_url = start([sys.executable, "-m", "pyllama.server", *flags])
        theirs, theirs_url = start([args.llama_server, *flags, "--no-webui"])
        try:
            best: dict[str, dict[str, float]] = {}
            for _ in range(args.repeat):
                for side, url in (("pyllama", ours_url), ("llama_server", theirs_url)):
                    r = turn(url, args.gen_tokens)
                    if side not in best or r["tok_per_s"] > best[side]["tok_per_s"]:
                        best[side] = r
        finally:
            for p in (ours, theirs):
                stop(p)
        row: dict[str, Any] = {"decoder": name, "gen_tokens": args.gen_tokens}
        for side, r in best.items():
            row.update({f"{side}_{k}": round(v, 2) for k, v in r.items()})
        row["ratio"] = round(best["pyllama"]["tok_per_s"] / best["llama_server"]["tok_per_s"], 3)
        print(json.dumps(row) if args.json else row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
