"""Where the server listens (--host with several addresses and UNIX sockets) and how it
names its model (--alias, --tags), as llama-server."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile

import httpx as http
import pytest

from helpers.servers import running_server


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.flag_effect("--host", "--api-key")
def test_several_addresses_and_a_unix_socket(smollm_path, tmp_path):
    sock = str(tmp_path / "pyllama.sock")
    hosts = ["127.0.0.1", sock] + (["::1"] if _ipv6_loopback() else [])
    args = ["-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1"]
    with running_server(*args, "--host", ",".join(hosts), "--api-key", "k") as url:
        port = url.rsplit(":", 1)[1]
        clients = [http.Client(base_url=url)]
        clients.append(http.Client(base_url="http://local", transport=http.HTTPTransport(uds=sock)))
        if "::1" in hosts:
            clients.append(http.Client(base_url=f"http://[::1]:{port}"))
        for c in clients:
            with c:
                assert c.get("/health").status_code == 200
                assert c.post("/v1/completions", json={}).status_code == 401
                r = c.post(
                    "/v1/completions",
                    json={"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0},
                    headers={"Authorization": "Bearer k"},
                    timeout=60,
                )
                assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4


def test_an_address_that_cannot_be_bound_fails_clearly(smollm_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyllama.server",
            "-m",
            smollm_path,
            "--host",
            "127.0.0.1,192.0.2.1",
        ],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        timeout=60,
    )
    assert r.returncode != 0 and "192.0.2.1" in r.stderr


@pytest.mark.flag_effect("--alias", "--tags")
def test_aliases_and_tags(smollm_path):
    args = ["-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1"]
    with running_server(*args, "-a", "tiny, fim,code,fim", "--tags", "chat,small") as url:
        model = http.get(url + "/v1/models").json()["data"][0]
        assert model["aliases"] == ["code", "fim", "tiny"]  # a set, as llama-server's
        assert model["tags"] == ["chat", "small"]
        assert model["id"] == "code"
        assert http.get(url + "/props").json()["model_alias"] == "code"


@pytest.mark.parametrize("value", ["0", "-2"])
def test_bad_sleep_value_is_refused(value):
    r = subprocess.run(
        [sys.executable, "-m", "pyllama.server", "--sleep-idle-seconds", value],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    assert r.returncode == 2 and "--sleep-idle-seconds" in r.stderr
