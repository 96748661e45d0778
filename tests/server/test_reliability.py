"""RELIABILITY.md items against a running pyllama-server: bad input gets a 4xx in the
error envelope, and the server keeps serving."""

from __future__ import annotations

import httpx
import pytest

from pyllama.server.cli import parse_args

http = httpx.Client(timeout=120.0)


def err(r: httpx.Response, status: int, type_: str = "invalid_request_error") -> str:
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert body["code"] == status and body["type"] == type_
    return body["message"]


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"42", b"{bad", b"\xff\xfe{}"])
def test_body_not_a_json_object(server, body):  # items 1 and 17
    err(
        http.post(
            server + "/completion", content=body, headers={"Content-Type": "application/json"}
        ),
        400,
    )


def test_wrong_content_type_from_a_browser(server):  # item 2
    """A page may post text/plain cross-site without a preflight: refused when the request
    carries an Origin (browsers send one); tests/server/test_content_type.py has the rest."""
    headers = {"Content-Type": "text/plain", "Origin": "https://example.com"}
    r = http.post(server + "/completion", content=b'{"prompt": "x"}', headers=headers)
    err(r, 415)


def test_lone_surrogate_is_refused(server):  # item 17
    body = b'{"prompt": "abc \\ud800 def", "n_predict": 1}'
    err(
        http.post(
            server + "/completion", content=body, headers={"Content-Type": "application/json"}
        ),
        400,
    )


@pytest.mark.parametrize(
    "messages",
    [
        None,
        "hello",
        [123],
        [{}],
        [{"role": 123, "content": "x"}],
        [{"role": "wizard", "content": "x"}],
        [],
    ],
)
def test_bad_messages(server, messages):  # items 5 and 9
    err(http.post(server + "/v1/chat/completions", json={"messages": messages}), 400)


@pytest.mark.parametrize(
    "field,value",
    [
        ("temperature", "hot"),
        ("max_tokens", "many"),
        ("n", 1.5),
        ("top_k", [1]),
        ("max_tokens", -2),
        ("n_keep", -2),
        ("n_discard", -1),
        ("dry_allowed_length", -1),
        ("n", 10**9),
        ("n", 5),  # more than the 4 slots
        ("n_probs", 1000),
        ("top_logprobs", 50),
    ],
)
def test_bad_fields(server, field, value):  # items 6, 7, 8, 11
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, field: value}
    message = err(http.post(server + "/v1/chat/completions", json=body), 400)
    assert field in message or "n must be" in message


def test_empty_prompt_and_bad_token_ids(server):  # items 9 and 10
    err(http.post(server + "/completion", json={"prompt": ""}), 400)
    err(http.post(server + "/completion", json={"prompt": [1, -5]}), 400)
    err(http.post(server + "/completion", json={"prompt": [49152]}), 400)


def test_invalid_constraints(server):  # item 14
    base = {"prompt": "x", "n_predict": 2}
    err(http.post(server + "/completion", json={**base, "grammar": "root ::= nowhere"}), 400)
    err(
        http.post(server + "/completion", json={**base, "json_schema": {"type": "no-such-type"}}),
        400,
    )
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    err(
        http.post(
            server + "/v1/chat/completions", json={**chat, "response_format": {"type": "yaml"}}
        ),
        400,
    )


def test_host_header_cannot_bypass_auth(smollm_path):  # item 29
    from helpers.servers import running_server

    with running_server(
        "-m", smollm_path, "-t", "2", "-c", "512", "-np", "1", "--api-key", "k"
    ) as url:
        for host in ("evil/health?", "localhost/v1/models#"):
            r = http.post(url + "/tokenize", json={"content": "x"}, headers={"Host": host})
            err(r, 401, "authentication_error")


def test_defaults_are_safe():  # item 31, and CORS off unless asked (item 30)
    s = parse_args([], environ={})
    assert s.host == "127.0.0.1" and s.cors_origins == [] and s.api_keys == []


def test_server_still_serves(server):  # after all of the above
    r = http.post(server + "/completion", json={"prompt": "Hello", "n_predict": 2})
    assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
