"""``pyllama [PROMPT]``: stream a completion from a model (the demo model by default)."""

from __future__ import annotations

import argparse
import sys

from pyllama.llama import Llama
from pyllama.model_file import check_model_file, load_failure, quiet_load
from pyllama.models import demo_model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pyllama", description=__doc__)
    ap.add_argument("prompt", nargs="?", default="The three laws of robotics are")
    ap.add_argument(
        "-m", "--model", help="GGUF file (default: the demo model, fetched on first use)"
    )
    ap.add_argument("-n", "--n-predict", type=int, default=64, help="tokens to generate")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--chat", action="store_true", help="send the prompt as a user chat message")
    args = ap.parse_args(argv)

    path = args.model
    try:
        path = path or demo_model()
        check_model_file(path)
        with quiet_load():
            llm = Llama(path, n_ctx=2048, n_threads=args.threads, n_gpu_layers=-1, verbose=False)
    except Exception as e:  # one line saying which file and why, not a traceback
        print(f"pyllama: {load_failure(path, e)}", file=sys.stderr)
        return 1
    if args.chat:
        msgs = [{"role": "user", "content": args.prompt}]
        for chunk in llm.create_chat_completion(
            msgs, max_tokens=args.n_predict, temperature=args.temp, seed=args.seed, stream=True
        ):
            sys.stdout.write(chunk["choices"][0]["delta"].get("content", ""))
            sys.stdout.flush()
    else:
        sys.stdout.write(args.prompt)
        for chunk in llm.create_completion(
            args.prompt,
            max_tokens=args.n_predict,
            temperature=args.temp,
            seed=args.seed,
            stream=True,
        ):
            sys.stdout.write(chunk["choices"][0]["text"])
            sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
