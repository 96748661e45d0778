"""Start an HTTP server binary on a free port and wait for /health (benchmarks only)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], timeout: float = 300.0) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``cmd --port P`` (outside the source tree) and return it with its base URL
    once /health answers 200."""
    port = free_port()
    if os.sep in cmd[0]:  # a path given relative to here: the server runs elsewhere
        # absolute, links kept: a venv's python resolved is the base interpreter, outside
        # the venv and without its packages
        cmd = [os.path.abspath(cmd[0]), *cmd[1:]]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise TimeoutError(f"{cmd[0]} did not start in {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def peer_bin(name: str = "llama-server") -> str:
    """A peer binary built by ci/build_peer.sh (under $PYLLAMA_CACHE/peer/bin)."""
    cache = Path(os.environ.get("PYLLAMA_CACHE", Path.home() / ".cache/pyllama"))
    return str(cache / "peer/bin" / name)


def encoder_model(rerank: bool = False) -> str:
    """The embedding benchmarks' default model: all-MiniLM-L6-v2, or with ``rerank`` the
    same encoder with a fixed-seed classification head (llama.cpp's rank graph)."""
    from pyllama.models import embedding_model

    model = embedding_model()
    if not rerank:
        return model
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from helpers.derived_models import rerank_model

    return str(rerank_model(model))


def add_llama_server_argument(ap: argparse.ArgumentParser) -> None:
    """--llama-server: $LLAMA_SERVER_BIN, else the peer build."""
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER_BIN", peer_bin()))


def cpu_name() -> str:
    """The CPU's model name, as benchmark records name it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def append_results(rows: list[dict[str, object]]) -> None:
    """Append records to results/<bench>_<date>.jsonl, named by the first record."""
    out = Path(__file__).parent / "results" / f"{rows[0]['bench']}_{rows[0]['date']}.jsonl"
    with out.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"appended to {out}")
