"""``--metrics-public`` (pyllama's): with ``--api-key``, /metrics answers scrapers that
cannot send a key (a gateway's endpoint picker reads each pod's /metrics with only a scheme
and a path), while every other route still needs the key."""

from __future__ import annotations

import httpx

from helpers.servers import running_server

KEY = {"Authorization": "Bearer k"}


def _status(url: str, method: str, path: str, headers: dict[str, str] | None = None) -> int:
    body = {"content": "hi"} if method == "POST" else None
    return httpx.request(method, url + path, json=body, headers=headers, timeout=30).status_code


def test_metrics_answer_without_the_key_and_nothing_else_does(smollm_path: str) -> None:
    base = ("-m", smollm_path, "-t", "2", "-c", "512", "-np", "1", "--api-key", "k", "--metrics")
    with running_server(*base) as url:  # without it, /metrics needs the key as the rest
        assert _status(url, "GET", "/metrics") == 401
        assert _status(url, "GET", "/metrics", KEY) == 200
    with running_server(*base, "--metrics-public") as url:
        r = httpx.get(url + "/metrics", timeout=30)
        assert r.status_code == 200 and "llamacpp:prompt_tokens_total" in r.text
        assert _status(url, "POST", "/tokenize") == 401
        assert _status(url, "GET", "/slots") == 401
        assert _status(url, "GET", "/props") == 401
        assert _status(url, "POST", "/tokenize", KEY) == 200
