"""A Ray Serve replica that is one whole pyllama server, served without a socket.

The constructor builds ``create_app`` from pyllama-server's own flags and runs its lifespan
until the model is loaded, so Serve marks the replica ready only when it can answer (and a
model that cannot load fails the deployment with the loader's reason). ``check_health`` is
pyllama's ``/health``. Every method runs on the replica's one user event loop, the loop the
engine's AsyncEngine attaches to; nothing here blocks it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import ray
from ray import serve

from pyllama.serve.inproc import Forwarded, Lifespan, ResponseStart, call
from pyllama.serve.rayserve.flags import parse_server_args

__all__ = ["PyllamaReplica"]

_HEALTH = Forwarded("GET", "/health")


class PyllamaReplica:
    async def __init__(self, server_args: Sequence[str]) -> None:  # type: ignore[misc]
        # Ray actors may define an async __init__: the model loads on the replica's loop
        from pyllama.server.app import create_app

        self._app = create_app(parse_server_args(server_args))
        # which replica and node answered: for load balancers' logs and for the tests
        self._whoami = [
            (b"x-pyllama-replica", serve.get_replica_context().replica_id.unique_id.encode()),
            (b"x-pyllama-node", ray.get_runtime_context().get_node_id().encode()),
        ]
        self._lifespan = Lifespan(self._app)
        await self._lifespan.start()
        while (health := await self._health())[0] == 503:  # loading
            await asyncio.sleep(0.1)
        if health[0] != 200:
            await self._lifespan.stop()
            raise RuntimeError(f"pyllama could not load its model: {health[1]}")

    async def _health(self) -> tuple[int, str]:
        status, body = 0, b""
        async for part in call(self._app, _HEALTH):
            if isinstance(part, ResponseStart):
                status = part.status
            else:
                body += part
        return status, body.decode("utf-8", errors="replace")

    async def check_health(self) -> None:
        """Serve's health probe: pyllama's /health must answer 200."""
        status, body = await self._health()
        if status != 200:
            raise RuntimeError(f"/health answered {status}: {body}")

    async def handle(self, req: Forwarded) -> AsyncIterator[ResponseStart | bytes]:
        """Serve one forwarded HTTP request: a ResponseStart, then the body's parts."""
        async for part in call(self._app, req):
            if isinstance(part, ResponseStart):
                part = ResponseStart(part.status, part.headers + self._whoami)
            yield part

    async def __del__(self) -> None:
        # Serve calls this after the graceful drain (no requests left, or its timeout)
        await self._lifespan.stop()
