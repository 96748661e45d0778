"""A two-node Ray cluster with Serve on it, shared by the tests of this folder."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator

import pytest

from helpers.ray_cluster import ray_cluster
from helpers.servers import free_port


@pytest.fixture(scope="package")
def serve_url() -> Iterator[str]:
    """Serve's HTTP proxy on a two-node cluster (one proxy, on the head)."""
    import ray
    from ray import serve

    with ray_cluster(nodes=2) as address:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        port = free_port()
        serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            serve.shutdown()
            # ray's client leaves sockets to the garbage collector: collect them here, where
            # their ResourceWarning is known to be ray's
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                ray.shutdown()
                gc.collect()
