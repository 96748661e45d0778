"""Prefix-affinity request routing on Ray Serve's custom request-router API.

Each request goes to the replica where it adds the least work to what is already waiting
there. The work of a request on a replica is the part of its prompt that replica must
evaluate (its prompt's blocks past the longest prefix that replica holds) plus a fixed cost
for generating (``decode_bytes``); a replica's waiting work is the sum over its requests
that have not completed. So a shared prefix keeps its requests on the replica that has it as
long as queueing there costs less than evaluating the prefix again elsewhere. Near ties
(within an answer's cost and ``balance`` of the best score) go to the replica holding the
longest prefix, then to the prompt's rendezvous order, so that several ingresses place a new
prefix alike (``pyllama.serve.placement``). Ray's router base class tries the returned
ranks in order: the first with a replica that has room (``max_ongoing_requests``) gets it.

Why work and not request counts: on a cache miss a replica evaluates the whole prefix (on a
CPU, seconds for a long system prompt), on a hit only the question (milliseconds). A rule
"affinity unless N more requests wait there" sends requests to the idle replica exactly
when the prefix's replica is busy with misses, which makes more misses (docs/benchmarks.md).

What a replica holds and what waits there come from the replica itself: each replica keeps
the blocks every ingress sent it, bounded by what its context and host prompt cache hold,
and its ongoing work by sending ingress, and reports them (``record_routing_stats``, which
Serve's controller polls and broadcasts to every handle). So several ingress replicas route
on one shared state, with no actor of their own in the request path. A report is up to a
period old: each router adds what it sent itself since (its own index and in-flight work,
exact), and takes only the other ingresses' work from the report.

The router lives in the caller's process (the ingress), one instance per deployment handle,
and runs on that handle's event loop: its state needs no lock. The prompt's block hashes
come with the request (``Forwarded.prefix_blocks``), computed once by the ingress. A request
with ``Forwarded.to_replica`` set goes to that replica only (the ingress's broadcasts); the
router names the replicas it knows to ``broadcast.live_replicas``, for the ingress.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
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
from pyllama.serve.placement import Option, order
from pyllama.serve.prefix import BLOCK_BYTES

__all__ = ["PrefixAffinityRouter", "request_work"]

_CHOOSING_S = 5.0  # a first choice counts as load this long, or until its request is routed


def request_work(req: Forwarded, matched: int, block_bytes: int, decode_bytes: int) -> int:
    """What ``req`` costs a replica that holds ``matched`` of its blocks: the rest of its
    prompt and an answer (a generation request), nothing (anything else)."""
    if req.method != "POST":
        return 0
    return (len(req.prefix_blocks) - matched) * block_bytes + decode_bytes


def _forwarded(pending: PendingRequest | None) -> Forwarded | None:
    if pending is None:
        return None
    for arg in pending.args:
        if isinstance(arg, Forwarded):
            return arg
    return None


class _Reported:
    """One replica's last report, with its blocks as a set (built once per report)."""

    __slots__ = ("blocks", "capacity", "source", "work")

    def __init__(self, stats: Mapping[str, Any]) -> None:
        self.source = stats
        self.blocks = frozenset(stats.get("held") or ())
        self.work: dict[str, int] = dict(stats.get("work") or {})
        self.capacity: int | None = stats.get("capacity_blocks")


class PrefixAffinityRouter(RequestRouter):
    def initialize_state(  # type: ignore[override]
        self,
        decode_bytes: int = 1024,
        block_bytes: int = BLOCK_BYTES,
        capacity_blocks: int = 65536,
        policy: str = "prefix",
        balance: float = 0.25,
        **kwargs: Any,
    ) -> None:
        """``request_router_kwargs``: ``decode_bytes`` (the cost of generating an answer, in
        bytes of prompt evaluated), ``block_bytes`` (the ingress's block size),
        ``capacity_blocks`` (blocks remembered per replica until it reports its own),
        ``balance`` (a replica this share of the best score busier is as good: where the
        prompt's prefix is held, or its rendezvous order, decides; ``pyllama.serve.placement``),
        ``policy``: ``prefix``, or ``pow2`` (Serve's default policy: two replicas at random,
        the shorter queue; kept in this class so that broadcasts can pin a replica)."""
        if kwargs:
            raise TypeError(f"unknown PrefixAffinityRouter options: {sorted(kwargs)}")
        if policy not in ("prefix", "pow2"):
            raise ValueError(f"unknown routing policy {policy!r}")
        self.policy = policy
        self.balance = float(balance)
        self.decode_bytes = int(decode_bytes)
        self.block_bytes = int(block_bytes)
        self.index = PrefixIndex(int(capacity_blocks))  # what this router sent since reports
        self.routed_by_prefix = 0  # requests sent to a replica holding their prefix
        # work (bytes) of requests this router sent and not completed, and of requests
        # still being routed (their first choice: requests arriving together spread before
        # any is acknowledged)
        self._in_flight: dict[str, tuple[ReplicaID, int]] = {}
        self._choosing: dict[str, tuple[ReplicaID, int, float]] = {}
        self._reports: dict[ReplicaID, _Reported] = {}

    def _report(self, r: RunningReplica) -> _Reported:
        stats = r.routing_stats or {}
        rep = self._reports.get(r.replica_id)
        if rep is None or rep.source is not stats:
            rep = self._reports[r.replica_id] = _Reported(stats)
            if rep.capacity:
                self.index.resize(r.replica_id, rep.capacity)
        return rep

    def _match(self, r: RunningReplica, blocks: tuple[int, ...]) -> int:
        held = self._report(r).blocks
        n = 0
        for b in blocks:
            if b not in held:
                break
            n += 1
        return max(n, self.index.match(r.replica_id, blocks))

    def _waiting(self, r: RunningReplica, origin: str) -> int:
        """This router's work on ``r`` now, plus the other ingresses' as ``r`` reported it."""
        now = time.monotonic()
        rid = r.replica_id
        n = sum(w for x, w in self._in_flight.values() if x == rid)
        n += sum(w for x, w, t in self._choosing.values() if x == rid and now - t < _CHOOSING_S)
        return n + sum(w for o, w in self._report(r).work.items() if o != origin)

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        if pending_request is not None:
            # every candidate is in the ranks below: when none has room, Ray's base class
            # must sleep before asking again (its locality mixin sets this; without it the
            # routing loop spins, starving the queue-length probes it waits for)
            pending_request.routing_context.should_backoff = True
        req = _forwarded(pending_request)
        if req is not None and req.to_replica:
            return [[r for r in candidate_replicas if r.replica_id.unique_id == req.to_replica]]
        if self.policy == "pow2":
            return [random.sample(candidate_replicas, min(2, len(candidate_replicas)))]
        req = req or Forwarded("POST", "")
        shuffled = random.sample(candidate_replicas, len(candidate_replicas))  # ties: chance
        options = []
        for r in shuffled:
            matched = self._match(r, req.prefix_blocks)
            options.append(
                Option(
                    replica=r,
                    name=r.replica_id.unique_id,
                    waiting=self._waiting(r, req.origin),
                    work=request_work(req, matched, self.block_bytes, self.decode_bytes),
                    matched=matched,
                    held=self.index.size(r.replica_id) + len(self._report(r).blocks),
                )
            )
        key = req.prefix_blocks[0] if req.prefix_blocks else None
        ranked = order(options, key, self.decode_bytes, self.balance)
        if ranked and pending_request is not None:
            now = time.monotonic()
            for stale in [k for k, (_, _, t) in self._choosing.items() if now - t >= _CHOOSING_S]:
                del self._choosing[stale]
            best = ranked[0]
            rid = pending_request.metadata.internal_request_id
            self._choosing[rid] = (best.replica.replica_id, best.work, now)
        return [[o.replica] for o in ranked]

    def on_request_routed(
        self, pending_request: PendingRequest, replica_id: ReplicaID, result: ReplicaResult
    ) -> None:
        rid = pending_request.metadata.internal_request_id
        self._choosing.pop(rid, None)
        req = _forwarded(pending_request)
        if req is None or req.to_replica or self.policy != "prefix":
            return
        replica = self.curr_replicas.get(replica_id)
        matched = self._match(replica, req.prefix_blocks) if replica else 0
        self._in_flight[rid] = (
            replica_id,
            request_work(req, matched, self.block_bytes, self.decode_bytes),
        )
        if req.prefix_blocks:
            if matched:
                self.routed_by_prefix += 1
            self.index.record(replica_id, req.prefix_blocks)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        super().on_request_completed(replica_id, internal_request_id)
        self._in_flight.pop(internal_request_id, None)
        self._choosing.pop(internal_request_id, None)

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self.index.forget(replica_id)  # a new replica starts with empty caches
        self._reports.pop(replica_id, None)

    def update_replicas(self, replicas: list[RunningReplica]) -> None:
        super().update_replicas(replicas)
        self.index.keep_only(r.replica_id for r in replicas)
        live = {r.replica_id for r in replicas}
        for gone in [r for r in self._reports if r not in live]:
            del self._reports[gone]
        # Serve ships this class to the caller by value (cloudpickle), with its own copy of
        # this module's globals: the registry is reached through a real import
        from pyllama.serve.rayserve import broadcast

        dep = self._deployment_id
        broadcast.set_live_replicas(
            dep.app_name, dep.name, [r.replica_id.unique_id for r in replicas]
        )
