"""The placement flags on a real GPU, pyllama-server against llama-server (ci/gpu_check.sh flags).

For each case both servers start with the same flags on the same model; the check compares
what llama.cpp logged about placement (layers offloaded, model/KV buffers per device, the
context --fit chose) and the greedy text of a few prompts. One JSON line per case, then a
summary; exit 1 when a case differs. Not run by CI (it needs a GPU).

    python ci/gpu_flags.py --model M --llama-server BIN [--device CUDA0] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PROMPTS = ["The capital of France is", "def fibonacci(n):", "1, 2, 3, 4,"]
# what llama.cpp says about where things went; the numbers are compared as text
PLACEMENT = re.compile(
    r"offloaded \d+/\d+ layers"
    r"|\b\w+ model buffer size = +[\d.]+ MiB"
    r"|\b\w+ KV buffer size = +[\d.]+ MiB"
    r"|llama_context: n_ctx += \d+"
)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def serve(cmd: list[str], log: Path) -> dict:
    """Start cmd, wait for /health, run the prompts, stop it; its placement lines and texts."""
    port = free_port()
    with log.open("w") as f:
        proc = subprocess.Popen([*cmd, "--port", str(port)], stdout=f, stderr=subprocess.STDOUT,
                                cwd=tempfile.gettempdir())  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                return {"error": f"exited {proc.returncode}", "log": log.read_text()[-2000:]}
            if time.monotonic() > deadline:
                return {"error": "did not start in 180 s"}
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        body = {"n_predict": 32, "temperature": 0, "cache_prompt": False}
        texts = [post(url + "/completion", {**body, "prompt": p})["content"] for p in PROMPTS]
        n_ctx = json.loads(urllib.request.urlopen(url + "/props").read())[
            "default_generation_settings"
        ]["n_ctx"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    seen: list[str] = []
    for m in PLACEMENT.finditer(log.read_text()):
        line = re.sub(r" +", " ", m.group(0))
        if line not in seen:
            seen.append(line)
    return {"placement": sorted(seen), "n_ctx": n_ctx, "texts": texts}


def free_mib(index: int = 0) -> int | None:
    q = ["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"]
    try:
        return int(subprocess.check_output(q, text=True).split()[index])
    except (OSError, subprocess.CalledProcessError):
        return None  # no NVIDIA GPU: the --fit cases are left out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--device", default="CUDA0")
    ap.add_argument("--out", default=".")
    ap.add_argument("--threads", default="8")
    ap.add_argument("--only", default="", help="run the cases whose name holds this text")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = a.device
    free = free_mib()
    cases: dict[str, list[str]] = {
        "full offload": ["-ngl", "99"],
        "--no-kv-offload": ["-ngl", "99", "-nkvo"],
        "-ot layers 0-9 to the GPU, -ngl 0": ["-ngl", "0", "-ot", rf"blk\.[0-9]\.={dev}"],
        "-ot ffn to the CPU, -ngl 99": ["-ngl", "99", "-ot", r"ffn_(up|down|gate)=CPU"],
    }
    # --fit (on by default) with the free memory it may leave ever smaller: it lowers -ngl
    # and the context, which were left at their defaults
    for left in (2000, 900, 700, 600) if free is not None else ():
        cases[f"--fit, {left} MiB left"] = ["--fit", "on", "--fit-target", str(free - left)]
    sides = {
        "pyllama": [sys.executable, "-m", "pyllama.server", "-v"],
        "llama_server": [a.llama_server, "-v", "--no-webui"],
    }
    bad = 0
    cases = {k: v for k, v in cases.items() if a.only in k}
    for i, (name, flags) in enumerate(cases.items()):
        res = {
            side: serve([*cmd, "-m", a.model, "-t", a.threads, *flags], out / f"case{i}.{side}.log")
            for side, cmd in sides.items()
        }
        same = res["pyllama"] == res["llama_server"] and "error" not in res["pyllama"]
        bad += not same
        print(json.dumps({"case": name, "flags": flags, "same": same, **res}), flush=True)
    print(f"gpu_flags: {len(cases) - bad}/{len(cases)} cases identical (free {free} MiB)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
