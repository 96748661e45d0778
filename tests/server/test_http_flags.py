"""llama-server's HTTP and context options, each seen acting: one server carries them all
and answers differently from the shared default server (conftest's ``server``: -c 8192
-np 4) where each option says it should."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from helpers.servers import running_server

KEY = {"Authorization": "Bearer from-file"}
ORIGIN = "https://app.example"
UI = {"theme": "dark", "showTokens": 3}


@pytest.fixture(scope="module")
def flagged(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    d = tmp_path_factory.mktemp("http-flags")
    (d / "keys.txt").write_text("# a comment line\nfrom-file\n")
    (d / "ui.json").write_text(json.dumps(UI))
    args = [
        *("-m", smollm_path, "-t", "2", "-c", "1536", "-np", "3", "-n", "5"),
        *("--api-key-file", str(d / "keys.txt"), "--props", "--no-slots", "--no-webui"),
        *("--cors-origins", ORIGIN, "--cors-methods", "GET,POST", "--cors-headers", "X-Custom"),
        *("--no-cors-credentials", "--webui-config-file", str(d / "ui.json")),
        "--no-cache-prompt",
    ]
    with running_server(*args) as url:
        yield url


def _props(url: str, headers: dict | None = None) -> dict:
    r = httpx.get(url + "/props", headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.flag_effect("--api-key-file")
def test_keys_come_from_the_file(flagged: str, server: str) -> None:
    body = {"content": "hi"}
    assert httpx.post(server + "/tokenize", json=body, timeout=30).status_code == 200
    assert httpx.post(flagged + "/tokenize", json=body, timeout=30).status_code == 401
    bad = {"Authorization": "Bearer # a comment line"}
    assert httpx.post(flagged + "/tokenize", json=body, headers=bad, timeout=30).status_code == 401
    assert httpx.post(flagged + "/tokenize", json=body, headers=KEY, timeout=30).status_code == 200


@pytest.mark.flag_effect("--ctx-size", "--parallel")
def test_context_and_slots(flagged: str, server: str) -> None:
    ours, default = _props(flagged, KEY), _props(server)
    assert (default["total_slots"], default["default_generation_settings"]["n_ctx"]) == (4, 2048)
    assert (ours["total_slots"], ours["default_generation_settings"]["n_ctx"]) == (3, 512)


@pytest.mark.flag_effect("--n-predict")
def test_n_predict_is_the_default_length(flagged: str, server: str) -> None:
    body = {"prompt": "Count: one, two,", "ignore_eos": True, "temperature": 0}
    r = httpx.post(flagged + "/completion", json=body, headers=KEY, timeout=120).json()
    assert (r["tokens_predicted"], r["stop_type"]) == (5, "limit")
    assert _props(flagged, KEY)["default_generation_settings"]["params"]["n_predict"] == 5


@pytest.mark.flag_effect("--props")
def test_props_can_be_posted(flagged: str, server: str) -> None:
    assert httpx.post(server + "/props", json={}, timeout=30).status_code == 501
    r = httpx.post(flagged + "/props", json={}, headers=KEY, timeout=30)
    assert r.status_code == 200 and r.json() == {"success": True}


@pytest.mark.flag_effect("--no-slots")
def test_no_slots_endpoint(flagged: str, server: str) -> None:
    assert httpx.get(server + "/slots", timeout=30).status_code == 200
    assert httpx.get(flagged + "/slots", headers=KEY, timeout=30).status_code == 501


@pytest.mark.flag_effect("--cors-methods", "--cors-headers", "--no-cors-credentials")
def test_cors_grant(flagged: str) -> None:
    preflight = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "X-Custom",
    }
    r = httpx.options(flagged + "/completion", headers=preflight, timeout=30)
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert r.headers["access-control-allow-methods"] == "GET,POST"
    assert r.headers["access-control-allow-headers"] == "X-Custom"
    assert "access-control-allow-credentials" not in r.headers


@pytest.mark.flag_effect("--webui-config-file")
def test_ui_settings_from_the_file(flagged: str, server: str) -> None:
    assert _props(server)["ui_settings"] == {}
    assert _props(flagged, KEY)["ui_settings"] == UI


@pytest.mark.flag_effect("--no-webui")
def test_no_page_at_the_root(flagged: str, server: str) -> None:
    html = {"Accept": "text/html"}
    page = httpx.get(server + "/", headers=html, timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    r = httpx.get(flagged + "/", headers={**html, **KEY}, timeout=30)
    assert not r.headers.get("content-type", "").startswith("text/html")


@pytest.mark.flag_effect("--no-cache-prompt")
def test_prompts_are_not_cached_by_default(flagged: str, server: str) -> None:
    body = {"prompt": "The history of Rome is long and", "n_predict": 2, "id_slot": 0}
    for url, headers, reused in ((server, {}, True), (flagged, KEY, False)):
        for _ in range(2):
            r = httpx.post(url + "/completion", json=body, headers=headers, timeout=120).json()
        assert (r["timings"]["cache_n"] > 0) is reused, url
