"""Vertex AI's prediction protocol (``AIP_MODE=PREDICTION``): ``POST /predict`` with
``instances``, each answered by the endpoint its ``@requestFormat`` names."""

from __future__ import annotations

import httpx
import pytest

from pyllama.server.cli import parse_args
from pyllama.server.protocols.gcp import gcp_alias

from helpers.servers import running_server

ENV = {"AIP_MODE": "PREDICTION", "AIP_HEALTH_ROUTE": "ping", "AIP_PREDICT_ROUTE": "/vertex"}


@pytest.fixture(scope="module")
def url(smollm_path):
    args = ("-m", smollm_path, "-t", "2", "-c", "2048", "-np", "2", "--api-key", "k")
    with running_server(*args, env=ENV) as url:
        yield url


AUTH = {"Authorization": "Bearer k"}


def test_instances_run_through_their_endpoints(url):
    chat = {"max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    instances = [
        {"@requestFormat": "chatCompletions", **chat},
        {"@requestFormat": "/tokenize", "content": "hello world"},
        {"@requestFormat": "completions", "prompt": "One, two,", "n_predict": 2},
    ]
    r = httpx.post(url + "/vertex", json={"instances": instances}, headers=AUTH, timeout=120)
    assert r.status_code == 200
    chat_out, tokens, completion = r.json()["predictions"]
    assert chat_out["object"] == "chat.completion"  # stream is forced off
    assert chat_out["choices"][0]["message"]["role"] == "assistant"
    direct = httpx.post(url + "/tokenize", json={"content": "hello world"}, headers=AUTH)
    assert tokens == direct.json()
    assert completion["tokens_predicted"] == 2  # "completions" is llama-server's native route


def test_bad_instances_fail_alone(url):
    instances = [5, {"max_tokens": 1}, {"@requestFormat": "nope"}, {"@requestFormat": "detokenize"}]
    r = httpx.post(url + "/vertex", json={"instances": instances}, headers=AUTH)
    assert r.status_code == 200
    errors = [p.get("error", {}).get("message", "") for p in r.json()["predictions"][:3]]
    assert "must be a JSON object" in errors[0]
    assert "@requestFormat" in errors[1]
    assert "no handler registered for @requestFormat: nope" in errors[2]
    # an endpoint's own error comes back as its body
    assert "'tokens'" in r.json()["predictions"][3]["error"]["message"]


def test_body_checks_auth_and_health(url):
    assert httpx.post(url + "/vertex", json={"instances": []}).status_code == 401
    r = httpx.post(url + "/vertex", json={"instance": []}, headers=AUTH)
    assert r.status_code == 400 and "instances" in r.json()["error"]["message"]
    r = httpx.post(url + "/vertex", json={"instances": [{}] * 129}, headers=AUTH)
    assert r.status_code == 400 and "128" in r.json()["error"]["message"]
    assert httpx.get(url + "/ping").json() == {"status": "ok"}  # public, as /health


def test_aliases_and_port():
    assert gcp_alias("/v1/chat/completions") == "chatCompletions"
    assert gcp_alias("/apply-template") == "applyTemplate"
    assert gcp_alias("/v1/messages/count_tokens") == "messagesCountTokens"
    s = parse_args(["--port", "1234"], environ={"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "9"})
    assert s.port == 9 and s.gcp is not None and s.gcp.predict_route == "/predict"
    assert parse_args(["--port", "1234"], environ={"AIP_HTTP_PORT": "9"}).port == 1234
