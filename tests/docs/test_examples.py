"""Every command and Python example of the documents runs as written, against the demo model.

Python examples run in a fresh interpreter in an empty folder; one that talks to a server at
http://127.0.0.1:8080 talks to the shared test server instead. Shell examples run in bash in
a folder where ``model.gguf`` is the demo model: a ``pyllama-server`` line starts the server
on a free port (the example's 127.0.0.1:8080 becomes that port) and the block goes on once
it answers /health; ``curl`` fails on an HTTP error. Blocks that cannot run here say why in
a comment above them (tests/docs/test_block_marks.py holds them to it)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.doc_blocks import Block, examples
from helpers.servers import free_port

EXAMPLES = examples()
ADDRESSES = ("http://127.0.0.1:8080", "http://localhost:8080")

# bash functions in front of the block: the server in the background until it is healthy,
# and every server stopped when the block ends
PRELUDE = r"""
set -euo pipefail
DOCS_PIDS=()
pyllama-server() {
  case " $* " in
    *" --help "*|*" --version "*|*" --list-devices "*) command pyllama-server "$@"; return;;
  esac
  command pyllama-server "$@" --port "$DOCS_PORT" >>server.log 2>&1 &
  DOCS_PIDS+=($!)
  for _ in $(seq 1200); do
    if command curl -sf "http://127.0.0.1:$DOCS_PORT/health" >/dev/null; then return 0; fi
    if ! kill -0 "$!" 2>/dev/null; then cat server.log >&2; return 1; fi
    sleep 0.25
  done
  echo "pyllama-server never answered /health" >&2; cat server.log >&2; return 1
}
curl() { command curl --fail-with-body "$@"; echo; }
trap 'for p in "${DOCS_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done' EXIT
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "VIRTUAL_ENV"))}
    # an empty llama.cpp model cache: pyllama-server with no model serves the demo model
    env["LLAMA_CACHE"] = str(home / "llama-cache")
    env["PYLLAMA_LOG_LEVEL"] = "4"
    return env


def _run(cmd: list[str], code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    # its own process group: a server a block left behind (or its router's children) dies
    # with the block
    p = subprocess.Popen(
        [*cmd, code],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=900)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


@pytest.mark.parametrize("block", EXAMPLES, ids=[b.id for b in EXAMPLES])
def test_example_runs(block: Block, smollm_path: str, tmp_path: Path, request) -> None:
    code = block.code
    env = _env(tmp_path)
    if block.lang == "python":
        if any(a in code for a in ADDRESSES):
            url = request.getfixturevalue("server")
            for a in ADDRESSES:
                code = code.replace(a, url)
        done = _run([sys.executable, "-c"], code, tmp_path, env)
    else:
        (tmp_path / "model.gguf").symlink_to(smollm_path)
        port = free_port()
        env["DOCS_PORT"] = str(port)
        # a block that starts no server of its own asks the one the page started before it
        own = re.search(r"^pyllama-server\b", code, re.M)
        url = f"http://127.0.0.1:{port}" if own else request.getfixturevalue("server")
        for a in ADDRESSES:
            code = code.replace(a, url)
        done = _run(["bash", "-c"], PRELUDE + code, tmp_path, env)
    where = f"{block.id} ({block.lang})"
    assert done.returncode == 0, f"{where} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    # an example shows what it got: text the model wrote, a reply's JSON, not nothing (a
    # block that only starts a server has shown that it answers /health)
    if "print(" in code or "curl " in code or "pyllama -" in code:
        assert done.stdout.strip(), f"{where} printed nothing\n{done.stderr}"
