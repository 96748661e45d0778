"""Which replica a request goes to, so that several routers with slightly different views agree.

A router scores each replica by the work waiting there plus the work the request would add
(its prompt past the prefix that replica holds, and an answer): the lowest score wins. Two
ingress replicas see the same replicas but not the same numbers: each knows its own requests
exactly and the other's only as the replicas last reported them (about a second old). Where the
scores are close, the lowest is a coin toss that each router tosses on its own, and a group of
chats sharing a system prompt ends up on both replicas: both evaluate its prefix, and both
keep it in cache in place of another group's.

So the lowest score only decides when it is clearly lowest. Every replica within ``slack`` of
the best is as good, and among them the one holding the longest prefix of the prompt wins,
then the first in the prompt's rendezvous order: a hash of the prompt's first block and the
replica's name, the same in every router, with nothing shared. A new group thus lands on the
same replica whichever ingress its first chats cross, as long as no replica is more than
``slack`` (and a share of the
best score, ``balance``) busier than another (bounded load: past that the least loaded wins, as before).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

__all__ = ["Option", "order", "rendezvous"]


def rendezvous(key: int, name: str) -> int:
    """The replica's rank for ``key`` (lower first): the same in every process (no ``hash()``,
    whose strings are salted per process)."""
    digest = hashlib.blake2b(
        key.to_bytes(8, "little", signed=key < 0) + name.encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True)
class Option:
    """One replica, as one router sees it for one request."""

    replica: Hashable  # what the caller routes to
    name: str  # its name, the same in every router (Serve's replica unique id)
    waiting: int  # work waiting there, bytes of prompt evaluated
    work: int  # what this request adds there
    matched: int  # leading blocks of the prompt it holds
    held: int = 0  # blocks it holds in all: spreads prompts nobody can place

    @property
    def score(self) -> int:
        return self.waiting + self.work


def order(
    options: Sequence[Option], key: int | None, slack: int, balance: float = 0.0
) -> list[Option]:
    """``options`` best first: as good as the best are scores up to ``slack`` plus ``balance``
    times the best score above it. ``key`` is the prompt's first block hash (None when it has no
    whole block: then the lowest score, the fewest blocks held, then input order). Callers
    shuffle ``options`` so that the remaining ties go to chance."""
    ranked = sorted(options, key=lambda o: (o.score, o.held))  # stable: input order last
    if key is None or not ranked:
        return ranked
    bound = ranked[0].score * (1.0 + balance) + slack
    first = min(
        (o for o in ranked if o.score <= bound),
        key=lambda o: (-o.matched, rendezvous(key, o.name)),
    )
    return [first, *(o for o in ranked if o is not first)]
