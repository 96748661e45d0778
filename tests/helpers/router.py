"""Reading a router's /models: each model's listing and status, and waiting for a status."""

from __future__ import annotations

import time
from typing import Any

import httpx

__all__ = ["listing", "statuses", "wait_status"]


def listing(url: str, client: httpx.Client | None = None) -> dict[str, dict[str, Any]]:
    """Each model's /models entry by id (``client``: one with the router's API key)."""
    r = (client or httpx).get(url + "/models")
    return {m["id"]: m for m in r.json()["data"]}


def statuses(url: str, client: httpx.Client | None = None) -> dict[str, str]:
    return {name: m["status"]["value"] for name, m in listing(url, client).items()}


def wait_status(
    url: str, name: str, want: str, timeout: float = 120.0, client: httpx.Client | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while statuses(url, client).get(name) != want:
        assert time.monotonic() < deadline, f"{name} never became {want}: {statuses(url, client)}"
        time.sleep(0.05)
