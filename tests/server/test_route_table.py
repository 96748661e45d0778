"""Every route the vendored llama-server registers (tools/server/server.cpp) answers in
pyllama-server, single-model and router alike. Read from the source, so a llama.cpp update that adds a route fails
here until pyllama serves it."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.routing import Route

from pyllama.server.app import create_app
from pyllama.server.router.app import create_router_app
from pyllama.server.settings import Settings

SERVER_CPP = Path(__file__).parents[2] / "vendor/llama.cpp/tools/server/server.cpp"
_REGISTER = re.compile(r'ctx_http\.(get|post|del)\s*\(\s*"([^"]+)"')
_METHOD = {"get": "GET", "post": "POST", "del": "DELETE"}
ROUTER_ONLY = {("POST", "/models"), ("POST", "/models/load"), ("POST", "/models/unload"),
               ("GET", "/models/sse"), ("DELETE", "/models")}  # fmt: skip


def llama_server_routes() -> set[tuple[str, str]]:
    text = SERVER_CPP.read_text()
    routes = {(_METHOD[m], re.sub(r":(\w+)", r"{\1}", p)) for m, p in _REGISTER.findall(text)}
    assert len(routes) > 40  # the registrations were found
    return routes


def _served(app) -> set[tuple[str, str]]:
    out = set()
    for route in app.routes:
        if isinstance(route, Route):
            for method in route.methods or ():
                out.add((method, re.sub(r"\{(\w+)(:\w+)?\}", r"{\1}", route.path)))
    return out


def test_every_route_is_served() -> None:
    theirs = llama_server_routes()
    single = _served(create_app(Settings()))
    router = _served(create_router_app(Settings(router=True), []))
    missing_single = {r for r in theirs - ROUTER_ONLY if r not in single}
    missing_router = {r for r in theirs if r not in router}
    assert missing_single == set(), "new in llama-server: serve it"
    assert missing_router == set()
