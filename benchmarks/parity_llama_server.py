"""Greedy parity: Llama.create_completion against llama-server from the same vendor tree.

Starts llama-server (ci/build_peer.sh) on the model, sends each prompt to /completion
with temperature 0 and n_predict N, and compares the text with pyllama's
``Llama(...).create_completion(prompt, max_tokens=N, temperature=0)`` or, with
``--ours server``, with pyllama-server's /completion for the same request. ``--ngl N`` puts
N layers on the GPU on both sides and prints each server's offload from /props.

    python benchmarks/parity_llama_server.py [--model M] [--tokens 48] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from pathlib import Path

from servers import start, stop

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village,",
    "1, 2, 3, 4,",
]


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def offload(name: str, url: str) -> None:
    """The layers a server put on a GPU, as its /props says (llama-server may not say)."""
    with urllib.request.urlopen(url + "/props", timeout=30) as r:
        props = json.loads(r.read())
    keys = ("offloaded_layers", "offloadable_layers")
    print(json.dumps({"server": name, **{k: props.get(k) for k in keys}}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--ngl", type=int, help="layers on the GPU, both sides")
    ap.add_argument("--ours", choices=("api", "server"), default="api")
    cache = Path(os.environ.get("PYLLAMA_CACHE", Path.home() / ".cache/pyllama"))
    ap.add_argument(
        "--server",
        default=os.environ.get("LLAMA_SERVER_BIN_PATH", str(cache / "peer/bin/llama-server")),
    )
    args = ap.parse_args()
    from pyllama import Llama, demo_model

    model = args.model or demo_model()
    ngl = [] if args.ngl is None else ["-ngl", str(args.ngl)]
    flags = ["-m", model, "-t", str(args.threads), "-c", str(args.ctx), "-np", "1", *ngl]
    proc, url = start([args.server, *flags])
    mine = None
    try:
        if args.ours == "server":
            mine, my_url = start(["pyllama-server", *flags])
            offload("pyllama-server", my_url)
            offload("llama-server", url)
        else:
            gpu = {} if args.ngl is None else {"n_gpu_layers": args.ngl}
            llm = Llama(model, n_ctx=args.ctx, n_threads=args.threads, verbose=False, **gpu)
        same = 0
        for p in PROMPTS:
            body = {"prompt": p, "n_predict": args.tokens, "temperature": 0, "cache_prompt": False}
            theirs = post(url + "/completion", body)["content"]
            if mine is not None:
                ours = post(my_url + "/completion", body)["content"]
            else:
                choice = llm.create_completion(p, max_tokens=args.tokens, temperature=0)
                ours = choice["choices"][0]["text"]
            ok = ours == theirs
            same += ok
            print(
                json.dumps({"prompt": p, "identical": ok, "pyllama": ours, "llama_server": theirs})
            )
        print(f"{same}/{len(PROMPTS)} prompts identical")
        return 0 if same == len(PROMPTS) else 1
    finally:
        stop(proc)
        if mine is not None:
            stop(mine)


if __name__ == "__main__":
    sys.exit(main())
