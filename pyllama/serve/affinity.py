"""Which replica holds which prompt prefix: the router's memory, bounded per replica.

Each replica has an LRU set of the block hashes (``pyllama.serve.prefix``) of the prompts
sent to it. A request's match on a replica is how many of its leading blocks that set holds.
The set is an estimate of the replica's KV and prompt caches, not a copy of them: it is
bounded (``capacity_blocks``, or a replica's own bound from ``resize``: what its context and
host prompt cache hold), and a prompt's deeper blocks are forgotten before its shallow ones,
as a cache keeps a shared system prompt longer than the chats that follow it. A replica keeps
one for itself (what every ingress sent it) and reports it; a router keeps one for what it
sent since. Each instance is used from one event loop; no locks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence

__all__ = ["PrefixIndex"]


class PrefixIndex:
    def __init__(self, capacity_blocks: int = 65536) -> None:
        if capacity_blocks < 1:
            raise ValueError("capacity_blocks must be at least 1")
        self.capacity_blocks = capacity_blocks
        self._held: dict[Hashable, OrderedDict[int, None]] = {}
        self._capacity: dict[Hashable, int] = {}  # per replica, where it said

    def match(self, replica: Hashable, blocks: Sequence[int]) -> int:
        """How many leading blocks of ``blocks`` the replica was sent."""
        held = self._held.get(replica)
        if not held:
            return 0
        n = 0
        for b in blocks:
            if b not in held:
                break
            n += 1
        return n

    def best(self, replicas: Iterable[Hashable], blocks: Sequence[int]) -> tuple[int, list]:
        """(longest match, the replicas that have it)."""
        top, found = 0, []
        for r in replicas:
            n = self.match(r, blocks)
            if n > top:
                top, found = n, [r]
            elif n == top:
                found.append(r)
        return top, found

    def record(self, replica: Hashable, blocks: Sequence[int]) -> None:
        """The replica was sent a prompt with these blocks: they are now its newest."""
        held = self._held.setdefault(replica, OrderedDict())
        for b in reversed(blocks):  # the shallow blocks end up newest: evicted last
            held[b] = None
            held.move_to_end(b)
        self._trim(replica, held)

    def _trim(self, replica: Hashable, held: OrderedDict[int, None]) -> None:
        while len(held) > self._capacity.get(replica, self.capacity_blocks):
            held.popitem(last=False)

    def resize(self, replica: Hashable, capacity_blocks: int) -> None:
        """The replica holds at most this many blocks (what it reported of its caches)."""
        self._capacity[replica] = max(1, int(capacity_blocks))
        if replica in self._held:
            self._trim(replica, self._held[replica])

    def blocks(self, replica: Hashable) -> list[int]:
        """The blocks the replica holds, oldest first."""
        return list(self._held.get(replica, ()))

    def size(self, replica: Hashable) -> int:
        return len(self._held.get(replica, ()))

    def forget(self, replica: Hashable) -> None:
        """The replica is gone (or restarted with empty caches)."""
        self._held.pop(replica, None)
        self._capacity.pop(replica, None)

    def keep_only(self, replicas: Iterable[Hashable]) -> None:
        live = set(replicas)
        for r in [r for r in self._held if r not in live]:
            del self._held[r]
        for r in [r for r in self._capacity if r not in live]:
            del self._capacity[r]
