"""``-dr/--docker-repo``: a GGUF from a Docker model registry (llama.cpp's
``common_docker_resolve_model``), fetched into llama.cpp's cache file and used from there.
The registry is a local stand-in speaking the same token/manifest/blob protocol."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from pyllama.server import docker_repo

from helpers.servers import running_server

BLOB = b"GGUF" + bytes(range(256)) * 64
DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()


class _Registry(BaseHTTPRequestHandler):
    layers: ClassVar[list[dict]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/token?"):
            assert "scope=repository%3Aai%2Fsmollm2%3Apull" in self.path
            return self._send(200, json.dumps({"token": "t0k"}).encode())
        if self.headers.get("Authorization") != "Bearer t0k":
            return self._send(401, b"{}")
        if self.path == "/v2/ai/smollm2/manifests/135M-Q4_1":
            return self._send(200, json.dumps({"layers": self.layers}).encode())
        if self.path == f"/v2/ai/smollm2/blobs/{DIGEST}":
            return self._send(200, BLOB, "application/octet-stream")
        self._send(404, b"{}")


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Registry]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("DOCKER_REGISTRY_URL", url)
    monkeypatch.setenv("DOCKER_AUTH_URL", url + "/token")
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "cache"))
    _Registry.layers = [
        {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:0"},
        {"mediaType": "application/vnd.docker.ai.gguf.v3", "digest": DIGEST},
    ]
    yield _Registry
    server.shutdown()
    server.server_close()


def test_downloads_the_gguf_layer_into_llama_cpps_cache(registry, tmp_path: Path) -> None:
    path = docker_repo.resolve("smollm2:135M-Q4_1", offline=False)
    assert path == str(tmp_path / "cache" / "ai_smollm2_135M-Q4_1.gguf")
    assert Path(path).read_bytes() == BLOB
    # cached: used as it is, even offline
    assert docker_repo.resolve("ai/smollm2:135M-Q4_1", offline=True) == path


def test_refuses_a_bad_manifest_or_blob(registry, tmp_path: Path) -> None:
    registry.layers = [{"mediaType": "application/vnd.oci.image.config.v1+json"}]
    with pytest.raises(ValueError, match="No GGUF layer found in Docker manifest"):
        docker_repo.resolve("smollm2:135M-Q4_1", offline=False)
    registry.layers = [{"mediaType": "application/vnd.docker.ai.gguf.v3", "digest": "md5:1"}]
    with pytest.raises(ValueError, match="Invalid OCI digest"):
        docker_repo.resolve("smollm2:135M-Q4_1", offline=False)
    with pytest.raises(ValueError, match="Failed to get Docker manifest, HTTP code: 404"):
        docker_repo.resolve("smollm2:other", offline=False)
    with pytest.raises(ValueError, match=r"ai_smollm2_latest\.gguf is not in the cache"):
        docker_repo.resolve("smollm2", offline=True)
    assert not list((tmp_path / "cache").glob("*"))  # nothing half-written left


@pytest.mark.flag_effect("--docker-repo")
def test_server_serves_a_cached_docker_model(smollm_path: str, tmp_path: Path) -> None:
    (tmp_path / "ai_smollm2_latest.gguf").symlink_to(smollm_path)
    args = ["-dr", "smollm2", "--offline", "-c", "512", "-t", "2"]
    with running_server(*args, env={"LLAMA_CACHE": str(tmp_path)}) as url:
        assert httpx.get(url + "/props").json()["model_path"].endswith("ai_smollm2_latest.gguf")
        r = httpx.post(url + "/completion", json={"prompt": "Hi", "n_predict": 2})
        assert r.json()["tokens_predicted"] == 2
