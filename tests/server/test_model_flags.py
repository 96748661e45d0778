"""llama-server's model, context, CPU and HTTP options: their effects on a real server,
not only their parsing (issue 20)."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from pyllama import _core

from helpers.control_vector import write_control_vector
from helpers.servers import running_server

PROMPT = "Once upon a time, in a small village,"
BASE = ("-c", "1024", "-np", "1", "--temp", "0")


def _greedy(url: str, prefix: str = "", n: int = 16) -> str:
    r = httpx.post(
        url + prefix + "/completion", json={"prompt": PROMPT, "n_predict": n}, timeout=120
    )
    assert r.status_code == 200, r.text
    return r.json()["content"]


@pytest.fixture(scope="module")
def baseline(smollm_path: str) -> str:
    with running_server("-m", smollm_path, *BASE) as url:
        return _greedy(url)


@pytest.mark.flag_effect("--rope-freq-base", "--control-vector")
def test_rope_and_control_vectors_change_what_the_model_says(
    smollm_path: str, baseline: str, tmp_path: Path
) -> None:
    model = _core.Model(smollm_path, vocab_only=True)
    n_embd, n_layer = (
        int(model.meta("llama.embedding_length")),
        int(model.meta("llama.block_count")),
    )
    cv = write_control_vector(tmp_path / "cv.gguf", n_embd, n_layer)
    with running_server("-m", smollm_path, *BASE, "--rope-freq-base", "500") as url:
        assert _greedy(url) != baseline  # positions encoded with another base
    with running_server("-m", smollm_path, *BASE, "--control-vector", str(cv)) as url:
        assert _greedy(url) != baseline
    # scaled to 0, or applied to no layer that exists: the model is unchanged
    with running_server(
        "-m", smollm_path, *BASE, "--control-vector-scaled", f"{cv}:0", "--no-warmup"
    ) as url:
        assert _greedy(url) == baseline


def test_placement_options_keep_the_answer(smollm_path: str, baseline: str) -> None:
    """CPU placement, repacking, load modes, tensor overrides, fitting: where and how the
    work runs, never what it computes."""
    args = [
        # both cores: two threads pinned to one spin against each other for minutes
        *("-C", "0x3", "--cpu-strict", "1", "--prio", "1"),  # --poll: refused but for the default
        *("-Cb", "0x3", "--prio-batch", "0"),
        *("-ot", r"blk\.0\.=CPU", "--cpu-moe", "--no-repack", "--load-mode", "none"),
        *("--numa", "distribute", "--no-kv-offload", "--no-op-offload", "--fit", "on"),
        *("--check-tensors", "--swa-full", "--threads-http", "2"),
    ]
    with running_server("-m", smollm_path, *BASE, *args) as url:
        assert _greedy(url) == baseline


@pytest.mark.flag_effect("--override-kv")
def test_override_kv_changes_what_props_and_tokenize_report(smollm_path: str) -> None:
    """tokenizer.ggml.add_bos_token=bool:true: a BOS now starts every tokenized prompt."""
    with running_server("-m", smollm_path, "-c", "512") as url:
        plain = httpx.post(url + "/tokenize", json={"content": "hi", "add_special": True}).json()
    with running_server(
        "-m", smollm_path, "-c", "512", "--override-kv", "tokenizer.ggml.add_bos_token=bool:true"
    ) as url:
        bos = httpx.post(url + "/tokenize", json={"content": "hi", "add_special": True}).json()
        props = httpx.get(url + "/props").json()
    assert bos["tokens"][1:] == plain["tokens"] and len(bos["tokens"]) == len(plain["tokens"]) + 1
    assert bos["tokens"][0] == 1 and props["bos_token"] == "<|im_start|>"


def test_warmup_runs_unless_asked_not_to(smollm_path: str) -> None:
    model = _core.Model(smollm_path)
    assert _core.Engine(model, n_ctx=256).warmup_ms > 0  # a real decode ran, and took time
    assert _core.Engine(model, n_ctx=256, warmup=False).warmup_ms == -1


def _log_of(args: list[str], log: Path) -> str:
    with running_server(*args, "--log-file", str(log)) as url:
        _greedy(url, n=2)
    return log.read_text()


@pytest.mark.flag_effect("--log-file", "--log-prefix", "--no-warmup")
def test_log_file_and_warmup_line(smollm_path: str, tmp_path: Path) -> None:
    text = _log_of(["-m", smollm_path, "-c", "512", "--log-prefix"], tmp_path / "a.log")
    assert "I pyllama-server: listening on http://127.0.0.1:" in text
    assert "warmed up the model with an empty run" in text
    text = _log_of(["-m", smollm_path, "-c", "512", "--no-warmup"], tmp_path / "b.log")
    assert "listening on" in text and "warmed up" not in text


@pytest.mark.flag_effect("--api-prefix", "--path")
def test_api_prefix_moves_every_route(smollm_path: str, baseline: str, tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("static hello")
    with running_server(
        "-m",
        smollm_path,
        *BASE,
        "--api-prefix",
        "/llm",
        "--path",
        str(tmp_path),
        health="/llm/health",
    ) as url:
        assert httpx.get(url + "/llm/health").json() == {"status": "ok"}
        assert httpx.get(url + "/health").status_code == 404
        assert _greedy(url, "/llm") == baseline
        models = httpx.get(url + "/llm/v1/models").json()
        assert models["data"][0]["id"]
        assert httpx.get(url + "/llm/hello.txt").text == "static hello"


@pytest.mark.flag_effect("--reverse-prompt", "--embd-normalize", "--special")
def test_request_defaults_from_the_command_line(smollm_path: str, baseline: str) -> None:
    """-r becomes the stop of requests without one; --no-cache-prompt the cache_prompt
    default; --embd-normalize the embeddings' norm; -sp writes special tokens."""
    stop = baseline.split()[2]
    with running_server("-m", smollm_path, *BASE, "-r", stop, "--no-cache-prompt") as url:
        cut = _greedy(url)
        assert cut == baseline[: baseline.index(stop)]
        own = httpx.post(
            url + "/completion", json={"prompt": PROMPT, "n_predict": 16, "stop": ["zzz"]}
        ).json()
        assert own["content"] == baseline  # a request's own stop wins
    with running_server(
        "-m", smollm_path, "-c", "512", "--embedding", "--pooling", "mean", "--embd-normalize", "-1"
    ) as url:
        v = httpx.post(url + "/v1/embeddings", json={"input": "red"}).json()["data"][0]["embedding"]
        assert abs(sum(x * x for x in v) - 1.0) > 1e-2  # raw, not L2-normalized
    # a special token forced by a logit bias: written out with -sp, empty without
    forced = {"prompt": PROMPT, "n_predict": 1, "logit_bias": [[1, 100.0]]}
    for flags, text in (([], ""), (["-sp"], "<|im_start|>")):
        with running_server("-m", smollm_path, "-c", "512", *flags) as url:
            r = httpx.post(url + "/completion", json=forced, timeout=60).json()
            assert r["tokens_predicted"] == 1 and r["content"] == text


@pytest.mark.flag_effect("--sse-ping-interval")
def test_sse_pings_keep_a_quiet_stream_alive(smollm_path: str) -> None:
    """--sse-ping-interval 1: a stream waiting for its slot sends ':' lines meanwhile."""
    with running_server(
        "-m", smollm_path, "-c", "1024", "-np", "1", "--sse-ping-interval", "1"
    ) as url:
        long = {"prompt": PROMPT, "n_predict": 200, "stream": True, "ignore_eos": True}
        with httpx.Client(timeout=120) as c, c.stream("POST", url + "/completion", json=long):
            short = {"prompt": "Hi", "n_predict": 2, "stream": True}
            with c.stream("POST", url + "/completion", json=short) as r:
                lines = [line for line in r.iter_lines() if line]
        assert ":" in lines and lines[-1].startswith("data: ")


@pytest.mark.flag_effect("--reuse-port")
def test_reuse_port_lets_two_servers_share_a_port(smollm_path: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "pyllama.server",
        "-m",
        smollm_path,
        "-c",
        "256",
        "--port",
        str(port),
    ]
    procs = [
        subprocess.Popen(
            [*cmd, "--reuse-port"], cwd=tempfile.gettempdir(), stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().startswith("pyllama-server: listening on")
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
            assert p.stdout is not None
            p.stdout.close()
