"""``--ssl-key-file`` / ``--ssl-cert-file``: the server speaks HTTPS with that key and
certificate (a self-signed pair made with the openssl command line), and plain HTTP no
longer answers. The peer in CI is built without OpenSSL, so only pyllama-server is run.
``--port``: the server listens where it is told."""

from __future__ import annotations

import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return key, cert


def _wait_tls(client: httpx.Client, url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, f"the server exited {proc.returncode}"
        try:
            if client.get(url + "/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not become healthy over TLS"
        time.sleep(0.1)


@pytest.mark.flag_effect("--ssl-key-file", "--ssl-cert-file", "--port")
def test_the_server_speaks_https_with_the_given_pair(pair, tmp_path: Path) -> None:
    key, cert = pair
    # a router with no model: its /health answers 200 at once
    flags = ["--models-dir", str(tmp_path), "--ssl-key-file", str(key), "--ssl-cert-file", str(cert)]  # fmt: skip
    proc, url = start_process([*PYLLAMA_SERVER, *flags])  # --port P, a free port
    secure = url.replace("http://", "https://")
    try:
        # only the given certificate is trusted: the handshake proves the server uses it
        with httpx.Client(verify=ssl.create_default_context(cafile=str(cert))) as client:
            _wait_tls(client, secure, proc)
        with pytest.raises(httpx.TransportError):
            httpx.get(url + "/health", timeout=5)  # plain HTTP on a TLS socket
        with pytest.raises(httpx.ConnectError):  # a client that does not trust the pair
            httpx.get(secure + "/health", timeout=5)
    finally:
        stop_process(proc)


def test_plain_http_without_the_pair(tmp_path: Path) -> None:
    proc, url = start_process([*PYLLAMA_SERVER, "--models-dir", str(tmp_path)])
    try:
        wait_healthy(url, proc, timeout=60)
    finally:
        stop_process(proc)
