"""A JSON body is read whatever its Content-Type when no browser sent it: ``curl -d``
without ``-H 'Content-Type: application/json'`` sends a form type, and llama-server
answers it. A request with an ``Origin`` (a browser's) and a type a page can post
cross-site without a preflight is still refused with 415 (issue 38)."""

from __future__ import annotations

import json
import shutil
import subprocess

import httpx
import pytest

http = httpx.Client(timeout=120.0)

BODIES = {
    "/completion": {"prompt": "Hello", "n_predict": 2},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
    "/api/chat": {
        "model": "any",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": False,
        "options": {"num_predict": 2},
    },
    "/v1/messages": {
        "model": "any",
        "max_tokens": 2,
        "messages": [{"role": "user", "content": "Hi"}],
    },
}


@pytest.mark.parametrize("path", sorted(BODIES))
def test_curl_without_content_type_is_answered(server: str, path: str) -> None:
    curl = shutil.which("curl")
    assert curl, "curl is needed for this test"
    out = subprocess.run(
        [curl, "-sS", "-w", "\n%{http_code}", server + path, "-d", json.dumps(BODIES[path])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    body, _, status = out.stdout.rpartition("\n")
    assert status == "200", body
    assert isinstance(json.loads(body), dict)


@pytest.mark.parametrize(
    "ctype", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data"]
)
@pytest.mark.parametrize("path", sorted(BODIES))
def test_browser_form_post_is_refused(server: str, path: str, ctype: str) -> None:
    headers = {"Content-Type": ctype, "Origin": "https://evil.example"}
    r = http.post(server + path, content=json.dumps(BODIES[path]).encode(), headers=headers)
    assert r.status_code == 415, r.text
    assert "application/json" in r.text


def test_same_form_body_without_origin_is_answered(server: str) -> None:
    """The request the browser case sends, less the Origin: answered."""
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    r = http.post(
        server + "/completion", content=json.dumps(BODIES["/completion"]).encode(), headers=headers
    )
    assert r.status_code == 200, r.text
    assert r.json()["tokens_predicted"] == 2


def test_json_from_a_browser_is_answered(server: str) -> None:
    """A JSON-typed request needs a preflight in a browser, which CORS rules on."""
    headers = {"Content-Type": "application/json", "Origin": "https://evil.example"}
    r = http.post(
        server + "/completion", content=json.dumps(BODIES["/completion"]).encode(), headers=headers
    )
    assert r.status_code == 200, r.text


def test_a_form_body_that_is_not_json_gets_400(server: str) -> None:
    r = http.post(
        server + "/completion",
        content=b"prompt=Hello&n_predict=2",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 400, r.text
    assert "not valid JSON" in r.json()["error"]["message"]
