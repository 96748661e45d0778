"""A two-node Ray cluster with Serve on it, shared by the tests of this folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers.ray_cluster import serve_on_local_cluster


@pytest.fixture(scope="package")
def serve_url() -> Iterator[str]:
    """Serve's HTTP proxy on a two-node cluster (one proxy, on the head)."""
    with serve_on_local_cluster(nodes=2) as url:
        yield url
