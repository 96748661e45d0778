"""A server that cannot start says why in one line and exits non-zero within seconds, as
llama-server does ("exiting due to model loading error"), so that systemd, Docker or
Kubernetes restart or report it; "listening on" is printed only once the socket is bound."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gguf
import httpx
import numpy as np
import pytest

from helpers.servers import free_port, running_server

EXIT_WITHIN_S = 60  # generous for a loaded CI machine; a failed start takes about a second


def _start(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "pyllama.server", "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # the installed package, not the source tree
        timeout=EXIT_WITHIN_S,
    )
    return r, time.monotonic() - t0


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    """The failure's only line on stderr (no traceback, no llama.cpp log lines)."""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pyllama-server: "), r.stderr
    return lines[0]


def _unknown_architecture(path: Path) -> None:
    w = gguf.GGUFWriter(str(path), "frobnicator")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((16, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _truncated(path: Path, smollm_path: str) -> None:
    with open(smollm_path, "rb") as f:
        path.write_bytes(f.read(1 << 20))  # the header and part of the metadata


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (None, "no such file"),
        ("directory", "it is a directory"),
        ("text", "not a GGUF file"),
        ("truncated", "failed to read key-value pairs"),
        # cut inside the tensor data
        ("half", "tensor 'blk.15.attn_output.weight' data is not within the file bounds"),
        ("architecture", "unknown model architecture: 'frobnicator'"),
    ],
)
def test_a_model_that_cannot_be_loaded_ends_the_process(make, reason, tmp_path, smollm_path):
    """A missing, truncated or corrupt GGUF: one clear line and exit 1, no crash dump
    (item 20)."""
    model = tmp_path / "model.gguf"
    if make == "directory":
        model.mkdir()
    elif make == "text":
        model.write_text("this is a text file, not a model\n")
    elif make == "truncated":
        _truncated(model, smollm_path)
    elif make == "half":
        data = Path(smollm_path).read_bytes()
        model.write_bytes(data[: len(data) // 2])
    elif make == "architecture":
        _unknown_architecture(model)
    r, took = _start("-m", str(model))
    assert r.returncode == 1, r.stderr
    line = _one_line(r)
    assert f"cannot load model {model}: {reason}" in line
    assert took < EXIT_WITHIN_S


def test_a_model_too_big_for_memory_ends_the_process(smollm_path):
    # a KV cache of ~1 TB: the weights load, the context cannot be allocated
    r, _ = _start("-m", smollm_path, "-c", "50000000", "-t", "2")
    assert r.returncode == 1, r.stderr
    line = _one_line(r)
    assert f"cannot load model {smollm_path}: failed to create context" in line
    assert "insufficient memory" in line


def test_a_missing_draft_model_is_named(smollm_path, tmp_path):
    draft = tmp_path / "draft.gguf"
    r, _ = _start("-m", smollm_path, "--model-draft", str(draft))
    assert r.returncode == 1
    assert _one_line(r) == f"pyllama-server: cannot load model {draft}: no such file"


def test_a_port_in_use_is_reported_and_nothing_claims_to_listen(smollm_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "pyllama.server", "-m", smollm_path, "--port", str(port)],
            capture_output=True,
            text=True,
            cwd=tempfile.gettempdir(),
            timeout=EXIT_WITHIN_S,
        )
    assert r.returncode == 1
    assert "listening" not in r.stdout
    assert (
        _one_line(r) == f"pyllama-server: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_listening_is_printed_once_the_socket_accepts(smollm_path):
    cmd = [sys.executable, "-m", "pyllama.server", "-m", smollm_path, "--port", "0", "-c", "512"]
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir()
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            # --port 0: the line names the port the kernel chose, which must accept at once
            assert line.startswith("pyllama-server: listening on http://127.0.0.1:")
            port = int(line.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
            deadline = time.monotonic() + 120
            while httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code != 200:
                assert time.monotonic() < deadline, "the model never loaded"
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert proc.returncode == 0


def test_the_router_reports_a_model_that_cannot_load_and_goes_on(smollm_path, tmp_path):
    (tmp_path / "good.gguf").symlink_to(smollm_path)
    _truncated(tmp_path / "broken.gguf", smollm_path)
    args = ["--models-dir", str(tmp_path), "-t", "2", "-c", "1024", "-np", "1"]
    with running_server(*args) as url:
        body = {"model": "broken", "prompt": "Hi", "n_predict": 2}
        r = httpx.post(url + "/completion", json=body, timeout=120)
        assert r.status_code == 500
        message = r.json()["error"]["message"]
        assert "model 'broken' failed to load: cannot load model" in message
        assert "failed to read key-value pairs" in message
        models = {m["id"]: m["status"] for m in httpx.get(url + "/models").json()["data"]}
        assert models["broken"]["failed"] is True and models["broken"]["exit_code"] == 1
        body["model"] = "good"
        r = httpx.post(url + "/completion", json=body, timeout=120)
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
