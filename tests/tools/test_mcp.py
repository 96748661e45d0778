"""MCP servers (``--mcp-servers-json`` / ``--mcp-servers-config``): their tools on
``GET /tools`` as ``<server>_<tool>``, calls through ``POST /tools``, against real MCP
server processes (``tests/tools/fixtures/mcp_server.py``) and a real pyllama-server (a router
with no model loaded, so nothing waits on a model)."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from helpers.servers import SERVER_PIDS, alive, running_server

FIXTURE = str(Path(__file__).parent / "fixtures" / "mcp_server.py")


def _servers(**servers: dict) -> str:
    return json.dumps({"mcpServers": servers})


def _mcp(*extra: str, timeout_ms: int | None = None) -> dict:
    cfg: dict = {"command": sys.executable, "args": [FIXTURE, *extra]}
    if timeout_ms is not None:
        cfg["timeout_ms"] = timeout_ms
    return cfg


def _router(tmp: Path, *args: str):
    return running_server("--models-dir", str(tmp), "--models-max", "1", *args)


def _call(url: str, tool: str, timeout: float = 30, **params) -> dict:
    r = httpx.post(url + "/tools", json={"tool": tool, "params": params}, timeout=timeout)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    servers = _servers(
        t=_mcp(),
        slow=_mcp(timeout_ms=500),
        empty=_mcp("--no-tools"),
        broken={"command": "/nonexistent/mcp-server"},
    )
    with _router(tmp_path_factory.mktemp("models"), "--mcp-servers-json", servers) as url:
        yield url


@pytest.mark.flag_effect("--mcp-servers-json")
def test_tools_are_listed_with_the_server_prefix(url):
    tools = httpx.get(url + "/tools").json()
    names = [t["tool"] for t in tools]
    assert {"t_echo", "t_add", "slow_sleep"} <= set(names)
    assert not [n for n in names if n.startswith(("empty_", "broken_"))]
    echo = next(t for t in tools if t["tool"] == "t_echo")
    assert echo["type"] == "mcp" and echo["permissions"] == {"write": False}
    fn = echo["definition"]["function"]
    assert echo["definition"]["type"] == "function" and fn["name"] == "t_echo"
    assert fn["description"] == "Echo a message"
    assert fn["parameters"]["properties"]["message"] == {"type": "string"}


def test_calls_return_the_text_parts(url):
    assert _call(url, "t_echo", message="hi") == {"plain_text_response": "echo: hi"}
    assert _call(url, "t_add", a=3, b=5) == {"plain_text_response": "8"}


def test_an_error_then_success_from_the_same_process(url):
    pid = _call(url, "t_pid")["plain_text_response"]
    assert _call(url, "t_flaky") == {"error": "transient"}
    assert _call(url, "t_flaky") == {"plain_text_response": "ok"}
    assert _call(url, "t_pid")["plain_text_response"] == pid  # one live session


def test_notifications_and_stale_replies_are_skipped(url):
    assert _call(url, "t_noisy") == {"plain_text_response": "quiet now"}
    assert _call(url, "t_echo", message="after") == {"plain_text_response": "echo: after"}


def test_a_crashed_server_is_respawned(url):
    before = _call(url, "t_pid")["plain_text_response"]
    assert "error" in _call(url, "t_die")
    assert _call(url, "t_echo", message="back") == {"plain_text_response": "echo: back"}
    assert _call(url, "t_pid")["plain_text_response"] != before


def test_a_slow_call_times_out_and_the_server_stays_usable(url):
    t0 = time.monotonic()
    assert _call(url, "slow_sleep", seconds=0.9) == {"error": "request timed out"}
    assert time.monotonic() - t0 < 0.9
    time.sleep(0.6)  # the late reply has come: it is skipped by id, not taken as the next
    assert _call(url, "slow_echo", message="x") == {"plain_text_response": "echo: x"}


def test_concurrent_calls_all_get_their_own_reply(url):
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda i: _call(url, "t_echo", message=f"m{i}"), range(16)))
    assert [r["plain_text_response"] for r in replies] == [f"echo: m{i}" for i in range(16)]


def test_bad_requests(url):
    r = httpx.post(url + "/tools", json={"tool": "t_nope", "params": {}})
    assert r.status_code == 404 and 'unknown tool "t_nope"' in r.json()["error"]["message"]
    r = httpx.post(url + "/tools", json={"params": {}})
    assert r.status_code == 400 and "'tool'" in r.json()["error"]["message"]
    r = httpx.post(url + "/tools", json={"tool": "t_echo", "stream": True})
    assert r.status_code == 404 and "stream" in r.json()["error"]["message"]
    r = httpx.post(url + "/tools", content=b"{", headers={"Content-Type": "application/json"})
    assert r.status_code == 400


def test_cors_is_limited_to_localhost_with_tools(url):
    pre = {"Access-Control-Request-Method": "POST"}
    ok = httpx.options(url + "/tools", headers={"Origin": "http://localhost:5173", **pre})
    assert ok.headers["access-control-allow-origin"] == "http://localhost:5173"
    evil = httpx.options(url + "/tools", headers={"Origin": "http://evil.example", **pre})
    assert "access-control-allow-origin" not in evil.headers


def test_without_tools_the_endpoint_is_forbidden(tmp_path):
    with _router(tmp_path) as url:
        for r in (httpx.get(url + "/tools"), httpx.post(url + "/tools", json={"tool": "x"})):
            assert r.status_code == 403
            assert r.json()["error"]["type"] == "feature_disabled"


@pytest.mark.flag_effect("--mcp-servers-config")
def test_tools_need_the_api_key_and_a_config_file_works(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(_servers(t=_mcp()))
    with _router(tmp_path, "--mcp-servers-config", str(config), "--api-key", "k") as url:
        assert httpx.get(url + "/tools").status_code == 401
        r = httpx.get(url + "/tools", headers={"Authorization": "Bearer k"})
        assert "t_echo" in [t["tool"] for t in r.json()]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--mcp-servers-json", "not json", "--mcp-servers-json: failed to parse MCP config JSON"),
        (
            "--mcp-servers-config",
            "/nonexistent/mcp.json",
            "--mcp-servers-config: failed to open MCP config file: /nonexistent/mcp.json",
        ),
        (
            "--mcp-servers-json",
            '{"mcpServers": {"t": {"command": 1}}}',
            "--mcp-servers-json: MCP server 't': command must be a str",
        ),
    ],
)
def test_a_bad_config_stops_the_server_from_starting(flag, value, message):
    proc = subprocess.run(
        [sys.executable, "-m", "pyllama.server", "--models-max", "1", flag, value],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 1 and message in proc.stderr


def test_shutdown_does_not_wait_for_a_slow_call(tmp_path):
    servers = _servers(slow=_mcp(timeout_ms=30000), gc=_mcp("--grandchild"))
    with _router(tmp_path, "--mcp-servers-json", servers) as url:
        # a server whose grandchild holds its pipes still starts, answers and stops
        assert _call(url, "gc_echo", message="hi") == {"plain_text_response": "echo: hi"}
        pool = concurrent.futures.ThreadPoolExecutor(1)
        pending = pool.submit(_call, url, "slow_sleep", 60, seconds=20)
        time.sleep(1.5)
        pid = SERVER_PIDS[url]
        t0 = time.monotonic()
        subprocess.run(["kill", "-TERM", str(pid)], check=True)
        while alive(pid):
            assert time.monotonic() - t0 < 3, "shutdown waited on the MCP call"
            time.sleep(0.05)
        assert pending.result(timeout=5) == {"error": "cancelled"}
        pool.shutdown()
