"""The serving context reserves what llama-server's does: the rows of logits a step may ask
for (``n_outputs_max``: one per slot, every token when embedding) and so the same compute
buffer, in --fit's projection too. Compared with llama-server's own -v log lines."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from helpers.peer import require_peer
from helpers.servers import free_port

LINES = re.compile(r"(n_outputs_max(?:_per_seq)? += \d+|\w+ +compute buffer size += +[\d.]+ MiB)")


def startup_lines(cmd: list[str]) -> list[str]:
    """The buffer lines a server logs until it is healthy (its --fit dry run included)."""
    port = free_port()
    with tempfile.NamedTemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [*cmd, "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tempfile.gettempdir(),
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, Path(log.name).read_text()[-3000:]
                assert time.monotonic() < deadline, "not healthy in 120 s"
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        text = Path(log.name).read_text()
    return [re.sub(r" +", " ", m.group(1)) for m in LINES.finditer(text)]


@pytest.mark.parametrize(
    "flags",
    # for embeddings llama-server lowers n_batch to n_ubatch (pyllama keeps it: an input may
    # span ubatches on a causal model) and pyllama unifies the KV cache: both given, the same
    [["-np", "3"], ["-np", "2", "--embedding", "-b", "512", "-kvu"]],
    ids=["completions", "embeddings"],
)
def test_output_rows_and_compute_buffer_match_llama_server(
    smollm_path: str, flags: list[str]
) -> None:
    common = ["-m", smollm_path, "-t", "2", "-c", "2048", "-v", *flags]
    ours = startup_lines([sys.executable, "-m", "pyllama.server", *common])
    theirs = startup_lines([str(require_peer()), *common, "--no-webui"])
    assert any("n_outputs_max" in line for line in ours), ours
    assert ours == theirs
