"""llama.cpp's RPC backend: pyllama-rpc-server serves this machine's devices as rpc-server
does, and pyllama-server --rpc spreads a model over such servers. Two RPC servers on
127.0.0.1 here, each serving its CPU: the model split over them answers as one process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from helpers.servers import free_port, running_server

RPC_SERVER = [sys.executable, "-m", "pyllama.rpc"]
SERVER = [sys.executable, "-m", "pyllama.server"]
PROMPT = {"prompt": "The capital of France is", "n_predict": 16, "temperature": 0}


@contextmanager
def rpc_server(*args: str) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """A pyllama-rpc-server on a free port; yields host:port once it accepts connections,
    the process, and the file its stderr goes to."""
    port = free_port()
    err = Path(tempfile.mkdtemp()) / "stderr"
    with err.open("wb") as sink:
        proc = subprocess.Popen(
            [*RPC_SERVER, "-p", str(port), "-t", "1", *args],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            cwd=tempfile.gettempdir(),
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, err.read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        yield f"127.0.0.1:{port}", proc, err
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVER, *args],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, **env},
        timeout=120,
    )


def _answer(url: str) -> str:
    r = httpx.post(f"{url}/completion", json=PROMPT, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["content"]


@pytest.fixture(scope="module")
def two_rpc_servers() -> Iterator[list[str]]:
    with rpc_server() as (a, _, _), rpc_server() as (b, _, _):
        yield [a, b]


@pytest.mark.flag_effect("--rpc", "--list-devices")
def test_list_devices_shows_each_servers_device(two_rpc_servers):
    a, b = two_rpc_servers
    r = _run("--rpc", f"{a},{b}", "--list-devices")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Available devices:"
    assert lines[1].startswith(f"  RPC0: {a} (")
    assert lines[2].startswith(f"  RPC1: {b} (")


@pytest.mark.flag_effect("--rpc")
def test_a_model_split_over_two_rpc_servers_answers_as_one_process(smollm_path, two_rpc_servers):
    base = ("-m", smollm_path, "-t", "1", "-np", "1", "-c", "512")
    with running_server(*base) as url:
        alone = _answer(url)
    with running_server(*base, "--rpc", ",".join(two_rpc_servers), "-ngl", "99") as url:
        props = httpx.get(f"{url}/props", timeout=30).json()
        assert (props["offloaded_layers"], props["offloadable_layers"]) == (31, 31)
        assert [d["name"] for d in props["devices"]] == ["CPU", "RPC0", "RPC1"]
        assert _answer(url) == alone


def test_the_variable_names_the_servers_too(two_rpc_servers):
    r = _run("--list-devices", LLAMA_ARG_RPC=two_rpc_servers[0])
    assert r.returncode == 0, r.stderr
    assert f"RPC0: {two_rpc_servers[0]}" in r.stdout


def test_a_server_that_is_down_is_an_error_not_a_hang():
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    r = _run("--rpc", f"127.0.0.1:{port}", "--list-devices")
    assert r.returncode == 2
    assert f"--rpc: cannot connect to RPC server 127.0.0.1:{port}: Connection refused" in r.stderr
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("value", ["nonsense", "host:", ":50052", "127.0.0.1:99999", ","])
def test_a_malformed_endpoint_is_refused_by_name(value):
    r = _run("--rpc", value, "-m", "unused.gguf")
    assert r.returncode == 2
    assert "--rpc: " in r.stderr
    assert "is not host:port" in r.stderr or "no RPC servers specified" in r.stderr


def test_a_public_bind_says_loudly_what_it_exposes():
    with rpc_server("-H", "0.0.0.0") as (_, _, err):
        stderr = err.read_text()
    assert "WARNING: Host ('0.0.0.0') is != '127.0.0.1'" in stderr
    assert "Never expose the RPC server to an open network!" in stderr


def test_bad_rpc_server_flags_are_errors():
    r = subprocess.run(
        [*RPC_SERVER, "-t", "0"], capture_output=True, text=True, cwd=tempfile.gettempdir()
    )
    assert r.returncode == 1
    assert "error: invalid number of threads: 0" in r.stderr
    r = subprocess.run(
        [*RPC_SERVER, "-d", "NoSuchDevice"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    assert r.returncode == 1
    assert "error: unknown device: NoSuchDevice" in r.stderr
