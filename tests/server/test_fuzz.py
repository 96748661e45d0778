"""Property-based fuzzing of a running pyllama-server (issue 24, deliverable 3): bodies drawn
from its own ``/openapi.json`` (each JSON endpoint's fields at and past their bounds, hostile
messages, arbitrary JSON) and raw bytes that are not a JSON object, sent to every POST route.
Every case must be answered, in time, with no 5xx other than 501 (a feature the server was
started without, as llama-server answers), 4xx in an error envelope; the server is alive
afterwards. Deterministic (``derandomize``); generation lengths are capped at 2 tokens.

Short form in the suite; ``PYLLAMA_FUZZ_EXAMPLES=N`` runs N cases per property instead, and
``PYLLAMA_FUZZ_URL`` aims it at a server already running (``benchmarks/soak.py`` does both)."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.fuzz_bodies import BASES, body_for, hostile_raw
from helpers.servers import SERVER_PIDS, alive, running_server

EXAMPLES = int(os.environ.get("PYLLAMA_FUZZ_EXAMPLES", "300"))
TIMEOUT_S = 120.0  # a whole answer, stream included: far above any 2-token case
STATUSES: Counter[tuple[str, int]] = Counter()
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
CONTENT_TYPES = ["application/json", "text/plain", "", "application/x-www-form-urlencoded"]


@pytest.fixture(scope="module")
def fuzz_url(smollm_path: str) -> Iterator[str]:
    url = os.environ.get("PYLLAMA_FUZZ_URL")
    if url:
        yield url
        return
    args = ["-m", smollm_path, "-t", "2", "-c", "2048", "-np", "2", "--embedding", "--slots"]
    with running_server(*args, "--metrics") as url:
        yield url


@pytest.fixture(scope="module")
def client(fuzz_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fuzz_url, timeout=TIMEOUT_S) as c:
        yield c
    if STATUSES:  # what the cases got, for docs/reliability.md
        print(
            "\nfuzz statuses:",
            json.dumps(sorted((f"{p} {s}", n) for (p, s), n in STATUSES.items())),
        )


@pytest.fixture(scope="module")
def doc(client: httpx.Client) -> dict:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


def _check(client: httpx.Client, path: str, content: bytes, ctype: str) -> None:
    headers = {"Content-Type": ctype} if ctype else {}
    t0 = time.monotonic()
    with client.stream("POST", path, content=content, headers=headers) as r:
        data = b"".join(r.iter_bytes())
    took = time.monotonic() - t0
    STATUSES[(path, r.status_code)] += 1
    case = f"POST {path} {content[:300]!r}"
    assert took < TIMEOUT_S, f"{case}: {took:.0f} s"
    assert r.status_code < 500 or r.status_code == 501, f"{case} -> {r.status_code} {data[:300]!r}"
    if r.status_code >= 400:
        assert "error" in json.loads(data), f"{case} -> {r.status_code} {data[:300]!r}"


def _json_paths(doc: dict) -> list[str]:
    """POST routes with a typed body, the ones the base bodies make valid first."""
    typed = [
        p
        for p, ops in doc["paths"].items()
        if "$ref" in str(ops.get("post", {}).get("requestBody", ""))
    ]
    return sorted(p for p in typed if p in BASES) + sorted(p for p in typed if p not in BASES)


@FUZZ
@given(data=st.data())
def test_schema_driven_bodies_get_no_5xx(client: httpx.Client, doc: dict, data) -> None:
    path = data.draw(st.sampled_from(_json_paths(doc)), label="path")
    body = data.draw(body_for(path, doc), label="body")
    content = json.dumps(body).encode()  # lone surrogates travel as \ud800 escapes
    slot = data.draw(st.sampled_from(["0", "1", "-1", "99", "x", "1e3"]), label="slot")
    _check(client, path.replace("{id_slot}", slot), content, "application/json")


@FUZZ
@given(data=st.data())
def test_raw_bodies_on_every_post_route_get_no_5xx(client: httpx.Client, doc: dict, data) -> None:
    posts = sorted(p for p, ops in doc["paths"].items() if "post" in ops and "{" not in p)
    path = data.draw(st.sampled_from([*posts, "/slots/0?action=save", "/slots/9?action=x"]))
    _check(client, path, data.draw(hostile_raw), data.draw(st.sampled_from(CONTENT_TYPES)))


def test_server_alive_afterwards(client: httpx.Client, fuzz_url: str) -> None:
    assert client.get("/health").status_code == 200
    pid = SERVER_PIDS.get(fuzz_url)
    if pid is not None:
        assert alive(pid)
    r = client.post("/completion", json={"prompt": "Hello", "n_predict": 2})
    assert r.status_code == 200
