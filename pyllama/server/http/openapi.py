"""``GET /openapi.json``: an OpenAPI 3.1 document of the app's own routes, built from the
running app (``request.app.routes``) so that it cannot drift from what is served. A route's
request-body schema is the pydantic model its handler passes to ``parse(request, Model)``,
read from the handler's bytecode; a handler that reads ``json_body`` takes any JSON object."""

from __future__ import annotations

import dis
import inspect
import re
from collections.abc import Iterable, Iterator
from types import CodeType, FunctionType
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from pyllama import __version__
from pyllama.server.http.wire import json_response

__all__ = ["ROUTES", "build_openapi", "request_model", "route_operations"]

OPENAPI_VERSION = "3.1.0"
_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "type"],
            "properties": {
                "code": {"type": "integer"},
                "message": {"type": "string"},
                "type": {"type": "string"},
            },
        }
    },
}


def _codes(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _codes(const)


def request_model(handler: Any) -> type[BaseModel] | bool | None:
    """The model ``handler`` validates its JSON body with (``parse(request, Model)``);
    True when it reads a free JSON object (``json_body``), None when it reads no JSON."""
    fn = inspect.unwrap(handler)
    if not isinstance(fn, FunctionType):
        return None
    free_json = False
    for code in _codes(fn.__code__):
        after_parse = False
        for ins in dis.get_instructions(code):
            if ins.opname not in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_ATTR"):
                continue
            name = ins.argval
            if name == "parse":
                after_parse = True
            elif name == "json_body":
                free_json = True
            elif after_parse:
                value = fn.__globals__.get(name)
                if isinstance(value, type) and issubclass(value, BaseModel):
                    return value
    return True if free_json else None


def route_operations(routes: Iterable[BaseRoute]) -> Iterator[tuple[str, str, Any]]:
    """(path, lower-case method, endpoint) of every plain route, HEAD left out."""
    for route in routes:
        if isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    yield _PARAM.sub(r"{\1}", route.path), method.lower(), route.endpoint
        elif isinstance(route, Mount) and route.routes:
            for path, method, fn in route_operations(route.routes):
                yield route.path.rstrip("/") + path, method, fn


def _operation_id(method: str, path: str) -> str:
    return method + "_" + (re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_") or "root")


def build_openapi(routes: Iterable[BaseRoute], title: str, version: str) -> dict[str, Any]:
    """The OpenAPI document of ``routes``: every path and method, with the request body's
    JSON schema where the handler validates one, and the error envelope for 4xx/5xx."""
    ops = list(route_operations(routes))
    bodies = {(p, m): request_model(fn) for p, m, fn in ops}
    models = sorted(
        {b for b in bodies.values() if isinstance(b, type)},
        key=lambda m: (m.__name__, m.__module__),
    )
    refs, defs = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
    )
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    schemas["Error"] = _ERROR
    errors = {
        "description": "an error in the protocol's envelope",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    paths: dict[str, dict[str, Any]] = {}
    for path, method, _fn in ops:
        op: dict[str, Any] = {
            "operationId": _operation_id(method, path),
            "responses": {"200": {"description": "OK"}, "4XX": errors, "5XX": errors},
        }
        names = _PARAM.findall(path)
        if names:
            op["parameters"] = [
                {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                for n in names
            ]
        body = bodies[(path, method)]
        if body is not None and method in ("post", "put", "patch"):
            schema = refs[(body, "validation")] if isinstance(body, type) else {"type": "object"}
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": schema}},
            }
        paths.setdefault(path, {})[method] = op
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {"schemas": schemas},
    }


async def openapi_json(request: Request) -> Response:
    """The document of the app serving this request, built once."""
    doc = getattr(request.app.state, "openapi", None)
    if doc is None:
        doc = build_openapi(request.app.routes, "pyllama-server", __version__)
        request.app.state.openapi = doc
    return json_response(doc)


ROUTES: list[tuple[str, Any, list[str]]] = [("/openapi.json", openapi_json, ["GET"])]
