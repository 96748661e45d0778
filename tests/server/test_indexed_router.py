"""IndexedRouter gives every request the answer Starlette's ordered scan gives: the same
route, the same 405, 404 and slash redirect, patterns that shadow a fixed path, a
root_path, routes added after the first request."""

from __future__ import annotations

import asyncio
import itertools

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route, Router

from pyllama.server.app import create_app
from pyllama.server.http.routing import IndexedRouter
from pyllama.server.settings import Settings


def _named(name: str):
    async def endpoint(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"{name} {request.path_params}")

    return endpoint


def _table() -> list:
    sub = Router([Route("/x", _named("mounted-x"))])
    return [
        Route("/health", _named("health"), methods=["GET"]),
        Route("/items", _named("items-get"), methods=["GET"]),
        Route("/items", _named("items-post"), methods=["POST"]),
        Route("/shadowed", _named("shadowed-get"), methods=["GET"]),
        Route("/{name}", _named("pattern"), methods=["POST"]),  # after /health, before more
        Route("/shadowed", _named("shadowed-post"), methods=["POST"]),  # /{name} wins POST
        Route("/late", _named("late"), methods=["DELETE"]),
        Mount("/m", routes=[Route("/y", _named("mounted-y"))]),
        Route("/m/y", _named("fixed-under-mount")),  # the Mount wins it
        Mount("/sub", app=sub),
        Route("/slash/", _named("slash")),
        Route("/any", _named("any")),  # every method
    ]


def _app(indexed: bool) -> Starlette:
    app = Starlette(routes=_table())
    if indexed:
        app.router = IndexedRouter(app.router.routes)
    return app


def _answers(app: Starlette, requests: list[tuple[str, str]], root_path: str = "") -> list:
    async def run() -> list:
        transport = httpx.ASGITransport(app=app, root_path=root_path)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            out = []
            for method, path in requests:
                r = await client.request(method, root_path + path, follow_redirects=False)
                out.append((method, path, r.status_code, r.text, r.headers.get("location")))
            return out

    return asyncio.run(run())


PATHS = ["/health", "/items", "/shadowed", "/late", "/m/y", "/sub/x", "/slash", "/slash/",
         "/any", "/nothing", "/nothing/deeper", "/health/", "/"]  # fmt: skip
METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"]


@pytest.mark.parametrize("root_path", ["", "/api"])
def test_every_request_gets_the_scans_answer(root_path):
    requests = list(itertools.product(METHODS, PATHS))
    expected = _answers(_app(indexed=False), requests, root_path)
    assert _answers(_app(indexed=True), requests, root_path) == expected
    by_request = {(m, p): (status, text) for m, p, status, text, _ in expected}
    # the table's traps are live: a pattern and a Mount win over later fixed paths
    assert by_request[("POST", "/shadowed")] == (200, "pattern {'name': 'shadowed'}")
    assert by_request[("GET", "/shadowed")] == (200, "shadowed-get {}")
    assert by_request[("GET", "/m/y")] == (200, "mounted-y {}")
    assert by_request[("PUT", "/items")][0] == 405


def test_routes_added_after_the_first_request_are_found():
    app = _app(indexed=True)
    assert _answers(app, [("GET", "/added")])[0][2] == 405  # /{name} takes POST only
    app.router.routes.append(Route("/added", _named("added")))
    assert _answers(app, [("GET", "/added")])[0][3] == "added {}"
    app.router.routes.insert(0, Route("/{any}", _named("first"), methods=["GET"]))
    assert _answers(app, [("GET", "/added"), ("GET", "/health")]) == [
        ("GET", "/added", 200, "first {'any': 'added'}", None),
        ("GET", "/health", 200, "first {'any': 'health'}", None),
    ]


def test_pyllamas_route_table_answers_as_the_scan_does():
    """The server's own routes: for each fixed path and method, the index proposes the
    route the scan picks when that is a fixed-path route, and nothing otherwise (no model
    needed: nothing is called)."""
    router = create_app(Settings()).router
    assert isinstance(router, IndexedRouter)
    router._index()
    n = 0
    for route in router.routes:
        path = getattr(route, "path", None)
        if not path or "{" in path:
            continue
        for method in METHODS:
            scope = {"type": "http", "path": path, "root_path": "", "method": method}
            scan = next((r for r in router.routes if r.matches(scope)[0].name == "FULL"), None)
            fixed = isinstance(scan, Route) and not scan.param_convertors
            assert router._lookup(scope) is (scan if fixed else None), (method, path)
            n += fixed
    assert n > 50
