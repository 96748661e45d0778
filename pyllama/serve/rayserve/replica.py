"""A Ray Serve replica that is one whole pyllama server, served without a socket.

The constructor builds ``create_app`` from pyllama-server's own flags and runs its lifespan
until the model is loaded, so Serve marks the replica ready only when it can answer (and a
model that cannot load fails the deployment with the loader's reason). ``check_health`` is
pyllama's ``/health``. ``record_routing_stats`` reports what the routers read: the prompt
blocks this replica was sent by every ingress (bounded by what its slots and host prompt
cache hold: ``pyllama.serve.cachesize``) and its ongoing work by sending ingress. Every
method runs on the replica's one user event loop, the loop the engine's AsyncEngine attaches
to; nothing here blocks it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import ray
from ray import serve

from pyllama.serve.affinity import PrefixIndex
from pyllama.serve.cachesize import capacity_blocks, kv_bytes_per_token
from pyllama.serve.inproc import Forwarded, Lifespan, ResponseStart, call
from pyllama.serve.prefix import BLOCK_BYTES
from pyllama.serve.rayserve.flags import parse_server_args
from pyllama.serve.rayserve.router import request_work

__all__ = ["PyllamaReplica"]

_HEALTH = Forwarded("GET", "/health")
_SELF = 0  # the index's key for this replica's own blocks


class PyllamaReplica:
    async def __init__(  # type: ignore[misc]
        self,
        server_args: Sequence[str],
        block_bytes: int = BLOCK_BYTES,
        decode_bytes: int = 1024,
        capacity: int | None = None,
    ) -> None:
        # Ray actors may define an async __init__: the model loads on the replica's loop
        from pyllama.server.app import create_app

        settings = parse_server_args(server_args)
        self._app = create_app(settings)
        self.replica_id = serve.get_replica_context().replica_id.unique_id
        # which replica and node answered: for load balancers' logs and for the tests
        self._whoami = [
            (b"x-pyllama-replica", self.replica_id.encode()),
            (b"x-pyllama-node", ray.get_runtime_context().get_node_id().encode()),
        ]
        self._lifespan = Lifespan(self._app)
        await self._lifespan.start()
        while (health := await self._get(_HEALTH))[0] == 503:  # loading
            await asyncio.sleep(0.1)
        if health[0] != 200:
            await self._lifespan.stop()
            raise RuntimeError(f"pyllama could not load its model: {health[1]}")
        self._block_bytes = block_bytes
        self._decode_bytes = decode_bytes
        self.capacity_blocks = capacity or await self._capacity(settings)
        self._index = PrefixIndex(self.capacity_blocks)
        self._ongoing: dict[int, tuple[str, int]] = {}  # request -> (origin, work)
        self._ids = itertools.count()

    async def _capacity(self, settings: Any) -> int:
        """Blocks this replica's caches hold: every slot's context, and the host prompt
        cache (``--cache-ram``) at the model's KV bytes per token."""
        props = json.loads((await self._get(Forwarded("GET", "/props")))[1])
        slot_ctx = int(props.get("default_generation_settings", {}).get("n_ctx", 0))
        per_token = await asyncio.to_thread(
            kv_bytes_per_token,
            props.get("model_path", ""),
            settings.cache_type_k,
            settings.cache_type_v,
        )
        return capacity_blocks(
            slot_ctx * int(props.get("total_slots", 1)),
            settings.cache_ram_mib,
            per_token,
            self._block_bytes,
        )

    async def _get(self, req: Forwarded) -> tuple[int, str]:
        status, body = 0, b""
        async for part in call(self._app, req):
            if isinstance(part, ResponseStart):
                status = part.status
            else:
                body += part
        return status, body.decode("utf-8", errors="replace")

    async def check_health(self) -> None:
        """Serve's health probe: pyllama's /health must answer 200."""
        status, body = await self._get(_HEALTH)
        if status != 200:
            raise RuntimeError(f"/health answered {status}: {body}")

    async def record_routing_stats(self) -> dict[str, Any]:
        """What the routers of every ingress read (Serve polls it, then broadcasts it)."""
        work: dict[str, int] = {}
        for origin, w in self._ongoing.values():
            work[origin] = work.get(origin, 0) + w
        return {
            "held": self._index.blocks(_SELF),
            "capacity_blocks": self.capacity_blocks,
            "work": work,
            "ongoing": len(self._ongoing),
        }

    async def handle(self, req: Forwarded) -> AsyncIterator[ResponseStart | bytes]:
        """Serve one forwarded HTTP request: a ResponseStart, then the body's parts."""
        matched = self._index.match(_SELF, req.prefix_blocks)
        key = next(self._ids)
        work = request_work(req, matched, self._block_bytes, self._decode_bytes)
        self._ongoing[key] = (req.origin, work)
        if req.prefix_blocks:
            self._index.record(_SELF, req.prefix_blocks)
        try:
            async for part in call(self._app, req):
                if isinstance(part, ResponseStart):
                    part = ResponseStart(part.status, part.headers + self._whoami)
                yield part
        finally:
            del self._ongoing[key]

    async def __del__(self) -> None:
        # Serve calls this after the graceful drain (no requests left, or its timeout)
        await self._lifespan.stop()
