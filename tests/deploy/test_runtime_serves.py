"""The documented command line, run as written (the demo model in place of
/mnt/models/model.gguf, a free port in place of 8080), serves: /health says 200, a chat
completion comes back, and /metrics carries every metric the manifests read."""

from __future__ import annotations

import re
import sysconfig
import tempfile
from pathlib import Path

import httpx
import pytest

from helpers.servers import start_process, stop_process, wait_healthy

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MODEL_IN_POD = "/mnt/models/model.gguf"


def _server_command() -> str:
    path = Path(sysconfig.get_path("scripts")) / "pyllama-server"
    if not path.is_file():
        pytest.fail(f"{path} missing: install the package with its server extra")
    return str(path)


def _as_run_here(argv: list[str], model: str) -> list[str]:
    """argv with the model path replaced and ``--port 8080`` dropped (start_process adds a
    free port)."""
    i = argv.index("--port")
    argv = argv[:i] + argv[i + 2 :]
    assert argv.count(MODEL_IN_POD) == 1
    return [_server_command(), *(model if a == MODEL_IN_POD else a for a in argv[1:])]


def _metrics_the_manifests_read() -> set[str]:
    """Every llamacpp: name in deploy/ (KEDA's query, the picker's engineConfigs)."""
    text = "".join(p.read_text() for p in sorted(DEPLOY.rglob("*.yaml")))
    return set(re.findall(r"llamacpp:[a-z_]+", text))


def _exported(metrics_text: str) -> set[str]:
    return {
        re.split(r"[{ ]", line, maxsplit=1)[0]
        for line in metrics_text.splitlines()
        if line and not line.startswith("#")
    }


def test_the_documented_command_serves_the_demo_model(doc_commands, smollm_path):
    argv = _as_run_here(doc_commands["base"], smollm_path)
    with tempfile.TemporaryFile() as log:
        # LLAMA_ARG_THREADS: what the Deployment's env sets from the pod's CPU limit
        proc, url = start_process(argv, stdout=log, env={"LLAMA_ARG_THREADS": "2"})
        try:
            try:
                wait_healthy(url, proc, timeout=180)
            except AssertionError:
                log.seek(0)
                raise AssertionError(log.read().decode(errors="replace")[-4000:]) from None
            assert httpx.get(url + "/health", timeout=10).status_code == 200
            r = httpx.post(
                url + "/v1/chat/completions",
                json={
                    "messages": [{"role": "user", "content": "Say hello."}],
                    "max_tokens": 8,
                    "temperature": 0,
                },
                timeout=120,
            )
            assert r.status_code == 200, r.text
            answer = r.json()
            assert answer["choices"][0]["message"]["content"].strip()
            assert answer["usage"]["completion_tokens"] > 0
            metrics = httpx.get(url + "/metrics", timeout=10)
            assert metrics.status_code == 200
            wanted = _metrics_the_manifests_read()
            assert "llamacpp:requests_deferred" in wanted
            assert wanted - _exported(metrics.text) == set()
        finally:
            stop_process(proc)
