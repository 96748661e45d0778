"""A Starlette router that finds a fixed path's route by a dict lookup.

Starlette tries each route's regex in order: with pyllama's sixty-odd routes that is up to
sixty regex matches a request before the endpoint runs, on the event loop that also serves every
other client. The answer must stay the one the ordered scan gives, so the lookup only
proposes: the first route with that exact path whose methods take the request wins if no
earlier route whose path is a pattern (a Mount, a ``{param}``) matches it fully too;
anything else (a 405, a 404, a slash redirect) takes Starlette's own scan.
"""

from __future__ import annotations

from starlette._utils import get_route_path  # the path the routes see (in 0.40 and 1.x)
from starlette.routing import BaseRoute, Match, Route, Router
from starlette.types import Receive, Scope, Send

__all__ = ["IndexedRouter"]


def _fixed_path(route: BaseRoute) -> str | None:
    """The path a route matches exactly, if it is a plain ``Route`` without parameters."""
    if type(route).matches is not Route.matches or not isinstance(route, Route):
        return None
    return None if route.param_convertors else route.path


class IndexedRouter(Router):
    """``Router`` whose fixed-path routes are found by path; same answers as its scan."""

    _indexed: list[BaseRoute] | None = None
    _by_path: dict[str, list[tuple[int, Route]]]
    _patterns: list[tuple[int, BaseRoute]]

    def _index(self) -> None:
        self._by_path = {}
        self._patterns = []
        for i, route in enumerate(self.routes):
            path = _fixed_path(route)
            if path is None:
                self._patterns.append((i, route))
            else:
                self._by_path.setdefault(path, []).append((i, route))  # type: ignore[arg-type]
        self._indexed = list(self.routes)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # rebuilt whenever the route list changed (an embedding app may add routes
            # late); list equality tests identity first, so an unchanged list costs a
            # pointer walk
            if self._indexed != self.routes:
                self._index()
            route = self._lookup(scope)
            if route is not None:
                match, child_scope = route.matches(scope)
                if match is Match.FULL:  # always, by construction; the scan otherwise
                    scope.setdefault("router", self)
                    scope["route"] = route
                    scope.update(child_scope)
                    await route.handle(scope, receive, send)
                    return
        await super().app(scope, receive, send)

    def _lookup(self, scope: Scope) -> BaseRoute | None:
        candidates = self._by_path.get(get_route_path(scope))
        if not candidates:
            return None
        method = scope["method"]
        found = next(
            (c for c in candidates if c[1].methods is None or method in c[1].methods), None
        )
        if found is None:
            return None  # a 405: the scan builds it
        index, route = found
        for i, pattern in self._patterns:
            if i > index:
                break
            if pattern.matches(scope)[0] is Match.FULL:
                return None  # an earlier pattern wins: the scan finds it
        return route
