"""CORS (RELIABILITY item 30): off by default; llama-server's --cors-origins values,
including its special 'localhost'; never an arbitrary Origin echoed with credentials."""

from __future__ import annotations

import httpx
import pytest

from helpers.servers import running_server

PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "Authorization",
}


def _preflight(url: str, origin: str) -> httpx.Response:
    return httpx.options(url + "/completions", headers={"Origin": origin, **PREFLIGHT}, timeout=30)


def test_off_by_default(server):
    r = httpx.get(server + "/health", headers={"Origin": "http://localhost:3000"}, timeout=30)
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    assert "access-control-allow-origin" not in _preflight(server, "http://localhost").headers


@pytest.fixture(scope="module")
def cors_server(smollm_path):
    args = ["-m", smollm_path, "-t", "2", "-c", "512", "-np", "1", "--api-key", "k"]
    with running_server(*args, "--cors-origins", "localhost,https://app.example") as url:
        yield url


@pytest.mark.parametrize(
    "origin",
    ["http://localhost", "http://localhost:8080", "http://127.0.0.1:3000", "http://[::1]:3000"],
)
@pytest.mark.flag_effect("--cors-origins")
def test_localhost_origins_are_reflected(cors_server, origin):
    r = _preflight(cors_server, origin)  # no API key: browsers send none in a preflight
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == origin
    assert r.headers["access-control-allow-credentials"] == "true"
    assert r.headers["access-control-allow-methods"] == "GET, POST, DELETE, OPTIONS"
    assert r.headers["access-control-allow-headers"] == "*"


@pytest.mark.parametrize(
    "origin", ["http://evil.com", "http://localhost.evil.com", "http://notlocalhost", "null"]
)
def test_other_origins_get_no_grant(cors_server, origin):  # item 30
    r = _preflight(cors_server, origin)
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    assert "access-control-allow-credentials" not in r.headers


@pytest.mark.flag_effect("--cors-origins", "--api-key")
def test_listed_origin_on_real_requests(cors_server):
    hdr = {"Origin": "https://app.example", "Authorization": "Bearer k"}
    r = httpx.post(cors_server + "/tokenize", json={"content": "hi"}, headers=hdr, timeout=30)
    assert (
        r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
    )
    # an error the browser must be able to read carries the grant too
    r = httpx.post(
        cors_server + "/tokenize",
        json={"content": "hi"},
        headers={"Origin": "https://app.example"},
        timeout=30,
    )
    assert (
        r.status_code == 401 and r.headers["access-control-allow-origin"] == "https://app.example"
    )


def test_star_is_never_echoed_with_credentials(smollm_path):  # item 30
    args = ["-m", smollm_path, "-t", "2", "-c", "512", "-np", "1", "--cors-origins", "*"]
    with running_server(*args) as url:
        r = _preflight(url, "https://anywhere.example")
        assert r.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in r.headers
