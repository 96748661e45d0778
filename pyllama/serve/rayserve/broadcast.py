"""Requests every replica must see, and how their answers become one.

Behind Serve's proxy a request reaches one replica. Changing an adapter's scale
(``POST /lora-adapters``) or acting on a slot (``POST /slots/{id}?action=...``) on one replica
only would leave the replicas answering differently, and ``/metrics`` from one replica
would hide the others; so the ingress sends these to every replica. The admin answers
become one: the first replica's when all succeeded, else the first failure's. The metrics
become one Prometheus text in which every sample carries a ``replica`` label (the replica's
Serve id, as in the ``x-pyllama-replica`` header), each family's HELP and TYPE once.
"""

from __future__ import annotations

import re

__all__ = ["is_broadcast", "live_replicas", "merge_metrics", "set_live_replicas"]

# (app, deployment) -> the replicas (unique ids) the router in this process knows
_LIVE: dict[tuple[str, str], tuple[str, ...]] = {}


def set_live_replicas(app: str, deployment: str, replicas: list[str]) -> None:
    """The router's list of replicas, for the ingress of the same process."""
    _LIVE[(app, deployment)] = tuple(sorted(replicas))


def live_replicas(app: str, deployment: str) -> tuple[str, ...]:
    return _LIVE.get((app, deployment), ())


_SLOT_ACTION = re.compile(r"^/slots/[^/]+$")
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?(\s.*)$")


def is_broadcast(method: str, path: str) -> bool:
    """Whether ``method path`` goes to every replica."""
    if method == "GET":
        return path == "/metrics"
    return method == "POST" and (path == "/lora-adapters" or bool(_SLOT_ACTION.match(path)))


def _labelled(line: str, replica: str) -> str:
    m = _SAMPLE.match(line)
    if not m:
        return line
    name, labels, rest = m.groups()
    label = f'replica="{replica}"'
    return f"{name}{{{label},{labels}}}{rest}" if labels else f"{name}{{{label}}}{rest}"


def merge_metrics(texts: list[tuple[str, str]]) -> str:
    """One exposition from ``(replica, text)`` pairs: families in first-seen order, each
    with its comments once, then its samples from every replica with a replica label."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for replica, text in texts:
        family = ""
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line.split(maxsplit=3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    family = parts[2]
                    samples.setdefault(family, [])
                    seen = headers.setdefault(family, [])
                    if len([h for h in seen if h.split()[1] == parts[1]]) == 0:
                        seen.append(line)
                continue
            m = _SAMPLE.match(line)
            if m and not family:  # a sample with no TYPE before it: its own family
                family = m.group(1)
            samples.setdefault(family, []).append(_labelled(line, replica))
    out = []
    for family, lines in samples.items():
        out += headers.get(family, [])
        out += lines
    return "\n".join(out) + "\n"
