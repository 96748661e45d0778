"""Prefix-affinity request routing on Ray Serve's custom request-router API.

A request goes to the replica that was sent the longest prefix of its prompt (its KV, or
pyllama's host prompt cache, likely still holds it: the prompt is evaluated only past the
match), unless that replica has ``imbalance`` more requests in flight than the least loaded
one; then, and for prompts nobody has seen, the least loaded replica wins, ties going to the
replica holding the fewest blocks (so new prefixes spread out). Ray's router base class
probes queue lengths and tries each returned rank in order: the first rank that has a
replica with room gets the request.

The router lives in the caller's process (the ingress), one instance per deployment handle,
and runs on that handle's event loop: its index needs no lock. The prompt's block hashes
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
        imbalance: int = 4,
        min_match_blocks: int = 1,
        capacity_blocks: int = 65536,
        **kwargs: Any,
    ) -> None:
        """``request_router_kwargs``: ``imbalance`` (in-flight requests more than the least
        loaded replica before affinity yields), ``min_match_blocks`` (shortest match that
        counts), ``capacity_blocks`` (blocks remembered per replica)."""
        if kwargs:
            raise TypeError(f"unknown PrefixAffinityRouter options: {sorted(kwargs)}")
        self.imbalance = int(imbalance)
        self.min_match_blocks = max(1, int(min_match_blocks))
        self.index = PrefixIndex(int(capacity_blocks))
        self.routed_by_prefix = 0  # requests sent to a replica for its prefix (for tests)
        # Load as this router sees it: requests it sent that have not completed, plus the
        # first choice of requests still being routed (so that requests arriving together
        # spread out before any of them is acknowledged). Ray's queue-length cache lags.
        self._in_flight: dict[str, ReplicaID] = {}
        self._choosing: dict[str, tuple[ReplicaID, float]] = {}

    def _load(self, replica: RunningReplica) -> int:
        rid = replica.replica_id
        now = time.monotonic()
        n = sum(1 for r in self._in_flight.values() if r == rid)
        n += sum(1 for r, t in self._choosing.values() if r == rid and now - t < _CHOOSING_S)
        return n

    def _note_choice(self, pending: PendingRequest | None, first: RunningReplica) -> None:
        if pending is not None:
            now = time.monotonic()
            stale = [k for k, (_, t) in self._choosing.items() if now - t >= _CHOOSING_S]
            for k in stale:
                del self._choosing[k]
            self._choosing[pending.metadata.internal_request_id] = (first.replica_id, now)

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        shuffled = random.sample(candidate_replicas, len(candidate_replicas))  # ties: random
        by_load = sorted(shuffled, key=lambda r: (self._load(r), self.index.size(r.replica_id)))
        ranks = self._rank(by_load, _blocks(pending_request))
        if ranks:
            self._note_choice(pending_request, ranks[0][0])
        return ranks

    def _rank(
        self, by_load: list[RunningReplica], blocks: tuple[int, ...]
    ) -> list[list[RunningReplica]]:
        if not blocks or not by_load:
            return [[r] for r in by_load]
        top, holders = self.index.best([r.replica_id for r in by_load], blocks)
        if top < self.min_match_blocks:
            return [[r] for r in by_load]
        least = self._load(by_load[0])
        held = set(holders)
        preferred = [
            r for r in by_load if r.replica_id in held and self._load(r) - least <= self.imbalance
        ]
        if not preferred:
            return [[r] for r in by_load]
        rest = [[r] for r in by_load if r not in preferred]
        return [preferred, *rest]

    def on_request_routed(
        self, pending_request: PendingRequest, replica_id: ReplicaID, result: ReplicaResult
    ) -> None:
        rid = pending_request.metadata.internal_request_id
        self._choosing.pop(rid, None)
        self._in_flight[rid] = replica_id
        blocks = _blocks(pending_request)
        if blocks:
            if self.index.match(replica_id, blocks) >= self.min_match_blocks:
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
