"""``GET /openapi.json`` (issue 24, deliverable 3): a valid OpenAPI document with every
route the app serves, single-model and router alike, and the request-body schema of each
JSON endpoint; it sits behind ``--api-key`` like the other non-public routes."""

from __future__ import annotations

import httpx
from openapi_spec_validator import validate
from starlette.testclient import TestClient

from pyllama.server.app import create_app
from pyllama.server.http.openapi import build_openapi, request_model, route_operations
from pyllama.server.protocols.anthropic.routes import messages
from pyllama.server.protocols.openai.routes import chat_completions
from pyllama.server.protocols.openai.schemas import ChatRequest
from pyllama.server.router.app import create_router_app
from pyllama.server.settings import Settings


def _listed(doc: dict) -> set[tuple[str, str]]:
    return {(p, m) for p, ops in doc["paths"].items() for m in ops}


def test_every_route_is_in_the_document_and_it_is_valid() -> None:
    for app in (create_app(Settings()), create_router_app(Settings(router=True), [])):
        doc = build_openapi(app.routes, "pyllama-server", "0")
        validate(doc)
        served = {(p, m) for p, m, _ in route_operations(app.routes)}
        assert len(served) > 50
        assert served == _listed(doc)
        assert ("/openapi.json", "get") in served


def test_json_endpoints_carry_their_request_schema() -> None:
    assert request_model(chat_completions) is ChatRequest
    doc = build_openapi(create_app(Settings()).routes, "pyllama-server", "0")
    schemas = doc["components"]["schemas"]
    for path in ("/v1/chat/completions", "/completion", "/v1/messages", "/api/chat",
                 "/v1/responses", "/v1/embeddings", "/tokenize"):  # fmt: skip
        body = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        name = body["schema"]["$ref"].rsplit("/", 1)[1]
        assert name in schemas, path
    chat = next(v for k, v in schemas.items() if k.endswith("openai__schemas__ChatRequest"))
    assert "messages" in chat["required"]
    assert chat["properties"]["temperature"]["anyOf"][0]["maximum"] == 100.0
    assert request_model(messages) is not None
    assert "requestBody" not in doc["paths"]["/health"]["get"]


def test_served_by_the_running_server(server: str) -> None:
    r = httpx.get(server + "/openapi.json", timeout=30)
    assert r.status_code == 200
    doc = r.json()
    validate(doc)
    assert {("/v1/chat/completions", "post"), ("/api/chat", "post"), ("/health", "get")} <= (
        _listed(doc)
    )


def test_behind_the_api_key_while_health_stays_public() -> None:
    client = TestClient(create_app(Settings(api_keys=["k"])))  # no lifespan: no model
    assert client.get("/openapi.json").status_code == 401
    r = client.get("/openapi.json", headers={"Authorization": "Bearer k"})
    assert r.status_code == 200 and r.json()["openapi"].startswith("3.")
