"""Prefix-affinity request routing on Ray Serve's custom request-router API.

Each request goes to the replica where it adds the least work to what is already waiting
there. The work of a request on a replica is the part of its prompt that replica must
evaluate (its prompt's blocks past the longest prefix that replica was sent, whose KV it
likely still holds) plus a fixed cost for generating (``decode_bytes``); a replica's
waiting work is the sum over the requests this router sent it that have not completed.
So a shared prefix keeps its requests on the replica that has it as long as queueing
there costs less than evaluating the prefix again elsewhere, and prompts nobody has seen
go where the least work waits; ties go to the replica holding the fewest blocks (new
prefixes spread out), then to chance. Ray's router base class tries the returned ranks in
order: the first with a replica that has room (``max_ongoing_requests``) gets the request.

Why work and not request counts: on a cache miss a replica evaluates the whole prefix (on a
CPU, seconds for a long system prompt), on a hit only the question (milliseconds). A rule
"affinity unless N more requests wait there" sends requests to the idle replica exactly
when the prefix's replica is busy with misses, which makes more misses: under load it
collapsed to Serve's default router's hit rate (docs/benchmarks.md).

The router lives in the caller's process (the ingress), one instance per deployment handle,
and runs on that handle's event loop: its state needs no lock. The prompt's block hashes
come with the request (``Forwarded.prefix_blocks``), computed once by the ingress.
"""

from __future__ import annotations

import random
import time
from typing import Any

from ray.serve.request_router import (
    PendingRequest,
    ReplicaID,
    ReplicaResult,
    RequestRouter,
    RunningReplica,
)

from pyllama.serve.affinity import PrefixIndex
from pyllama.serve.inproc import Forwarded
from pyllama.serve.prefix import BLOCK_BYTES

__all__ = ["PrefixAffinityRouter"]

_CHOOSING_S = 5.0  # a first choice counts as load this long, or until its request is routed


def _blocks(pending: PendingRequest | None) -> tuple[int, ...]:
    if pending is None:
        return ()
    for arg in pending.args:
        if isinstance(arg, Forwarded):
            return arg.prefix_blocks
    return ()


class PrefixAffinityRouter(RequestRouter):
    def initialize_state(  # type: ignore[override]
        self,
        decode_bytes: int = 1024,
        block_bytes: int = BLOCK_BYTES,
        capacity_blocks: int = 65536,
        **kwargs: Any,
    ) -> None:
        """``request_router_kwargs``: ``decode_bytes`` (the cost of generating an answer, in
        bytes of prompt evaluated), ``block_bytes`` (the ingress's block size),
        ``capacity_blocks`` (blocks remembered per replica)."""
        if kwargs:
            raise TypeError(f"unknown PrefixAffinityRouter options: {sorted(kwargs)}")
        self.decode_bytes = int(decode_bytes)
        self.block_bytes = int(block_bytes)
        self.index = PrefixIndex(int(capacity_blocks))
        self.routed_by_prefix = 0  # requests sent to a replica holding their prefix
        # work (bytes) of requests sent and not completed, and of requests still being routed
        # (their first choice: requests arriving together spread before any is acknowledged;
        # Ray's own queue-length cache lags behind both)
        self._in_flight: dict[str, tuple[ReplicaID, int]] = {}
        self._choosing: dict[str, tuple[ReplicaID, int, float]] = {}

    def _work(self, replica: ReplicaID, blocks: tuple[int, ...]) -> int:
        """What sending this prompt to ``replica`` adds: its unmatched blocks, and decoding."""
        return (len(blocks) - self.index.match(replica, blocks)) * self.block_bytes + (
            self.decode_bytes
        )

    def _waiting(self, replica: ReplicaID) -> int:
        now = time.monotonic()
        n = sum(w for r, w in self._in_flight.values() if r == replica)
        n += sum(w for r, w, t in self._choosing.values() if r == replica and now - t < _CHOOSING_S)
        return n

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        blocks = _blocks(pending_request)
        shuffled = random.sample(candidate_replicas, len(candidate_replicas))  # ties: chance
        scored = sorted(
            (
                self._waiting(r.replica_id) + self._work(r.replica_id, blocks),
                self.index.size(r.replica_id),
                k,
                r,
            )
            for k, r in enumerate(shuffled)
        )
        if scored and pending_request is not None:
            now = time.monotonic()
            for key in [k for k, (_, _, t) in self._choosing.items() if now - t >= _CHOOSING_S]:
                del self._choosing[key]
            best = scored[0][3].replica_id
            self._choosing[pending_request.metadata.internal_request_id] = (
                best,
                self._work(best, blocks),
                now,
            )
        return [[r] for *_, r in scored]

    def on_request_routed(
        self, pending_request: PendingRequest, replica_id: ReplicaID, result: ReplicaResult
    ) -> None:
        rid = pending_request.metadata.internal_request_id
        self._choosing.pop(rid, None)
        blocks = _blocks(pending_request)
        self._in_flight[rid] = (replica_id, self._work(replica_id, blocks))
        if blocks:
            if self.index.match(replica_id, blocks):
                self.routed_by_prefix += 1
            self.index.record(replica_id, blocks)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        super().on_request_completed(replica_id, internal_request_id)
        self._in_flight.pop(internal_request_id, None)
        self._choosing.pop(internal_request_id, None)

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self.index.forget(replica_id)  # a new replica starts with empty caches

    def update_replicas(self, replicas: list[RunningReplica]) -> None:
        super().update_replicas(replicas)
        self.index.keep_only(r.replica_id for r in replicas)
