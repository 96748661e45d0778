"""The chat page at ``/`` (``--webui``, on by default as in llama-server): the files of
``pyllama/webui/`` (plain HTML, CSS and JavaScript modules, no build step), held in memory
and served with an ETag.

``/`` answers a browser (``text/html`` in ``Accept``) with the page and every other client
with the route it had before (Ollama's "Ollama is running"), so Ollama clients that probe
``/`` see no change. The page's files are public, as llama-server's UI is: the page itself
asks for the API key when the server answers 401. Its Content-Security-Policy lets it talk
to its own origin only and run only its own scripts. ``/sw.js`` answers with a worker that
removes itself, as llama-server does when its UI is off: a browser that once ran
llama-server's UI on this address would otherwise keep showing it from its cache."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

__all__ = [
    "ASSET_PREFIX",
    "WEBUI_DIR",
    "Asset",
    "load_assets",
    "public_paths",
    "static_root",
    "webui_routes",
]

WEBUI_DIR = Path(__file__).resolve().parents[1] / "webui"
ASSET_PREFIX = "/webui/"
INDEX = "index.html"
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# the page reaches its own origin only; images may be data: and blob: URLs (attachments,
# exports), never remote ones, so model text cannot make the browser fetch anything
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
SW_REMOVE = b"""// pyllama serves no service worker: one left by another server's UI on this address
// unregisters itself, drops its caches and reloads its pages
self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil((async () => {
  await self.registration.unregister();
  for (const name of await caches.keys()) await caches.delete(name);
  for (const client of await self.clients.matchAll({ type: 'window' })) client.navigate(client.url);
})()));
"""

Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str

    @classmethod
    def of(cls, body: bytes, media_type: str) -> Asset:
        return cls(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')

    def response(self, request: Request, headers: dict[str, str] | None = None) -> Response:
        common = {"ETag": self.etag, "Cache-Control": "no-cache", **(headers or {})}
        if self.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=common)
        return Response(self.body, media_type=self.media_type, headers=common)


def _files(directory: Path) -> list[Path]:
    files = [p for p in sorted(directory.iterdir()) if p.is_file() and p.suffix in TYPES]
    if not any(p.name == INDEX for p in files):
        raise FileNotFoundError(f"the web page is missing: {directory / INDEX}")
    return files


def load_assets(directory: Path = WEBUI_DIR) -> dict[str, Asset]:
    """The page's files by name. ``FileNotFoundError`` when the page is not there (a
    package built without its data)."""
    return {p.name: Asset.of(p.read_bytes(), TYPES[p.suffix]) for p in _files(directory)}


def public_paths(page: bool, directory: Path = WEBUI_DIR) -> frozenset[str]:
    """What loads without an API key: ``/`` and ``/sw.js`` always (as in llama-server),
    the page's files when it is served."""
    paths = {"/", "/sw.js"}
    if page:
        paths |= {"/index.html", *(ASSET_PREFIX + p.name for p in _files(directory))}
    return frozenset(paths)


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "").lower()


def webui_routes(page: bool, fallback: Endpoint | None) -> list[Route]:
    """``/`` (the page for browsers, ``fallback`` for the rest), ``/index.html``, the
    page's files under ``/webui/`` and ``/sw.js``; with ``page`` off only ``/sw.js`` and
    ``fallback`` stay. Goes before the routes whose ``/`` it replaces."""
    sw = Asset.of(SW_REMOVE, TYPES[".js"])

    async def service_worker(request: Request) -> Response:
        return sw.response(request)

    routes = [Route("/sw.js", service_worker, methods=["GET"])]
    if not page:
        return routes
    assets = load_assets()
    index = assets[INDEX]

    async def root(request: Request) -> Response:
        if _wants_html(request):
            response = index.response(request, SECURITY_HEADERS)
        elif fallback is not None:
            response = await fallback(request)
        else:
            raise HTTPException(404)
        response.headers["Vary"] = "Accept"  # one URL, two answers: caches must tell them apart
        return response

    async def index_html(request: Request) -> Response:
        return index.response(request, SECURITY_HEADERS)

    async def asset(request: Request) -> Response:
        found = assets.get(request.path_params["name"])
        if found is None:
            raise HTTPException(404)
        return found.response(request, {"X-Content-Type-Options": "nosniff"})

    return [
        *routes,
        Route("/", root, methods=["GET", "HEAD"]),
        Route("/index.html", index_html, methods=["GET"]),
        Route(ASSET_PREFIX + "{name}", asset, methods=["GET"]),
    ]


def static_root(directory: str, fallback: Endpoint) -> list[Route]:
    """``--path``: a browser asking for ``/`` gets the directory's ``index.html`` (its other
    files are mounted after the API), every other client ``fallback``."""
    index = Path(directory) / INDEX

    async def root(request: Request) -> Response:
        if _wants_html(request) and index.is_file():
            response: Response = FileResponse(index)
        else:
            response = await fallback(request)
        response.headers["Vary"] = "Accept"
        return response

    return [Route("/", root, methods=["GET", "HEAD"])]
