"""llama-server built from the same vendor tree (ci/build_peer.sh), for tests that compare
with it. Missing, a test skips and says so; PYLLAMA_REQUIRE_PEER=1 (CI) makes it an error."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["PEER", "require_peer", "running_peer"]

PEER = Path(
    os.environ.get("LLAMA_SERVER_BIN")
    or Path(os.environ.get("PYLLAMA_CACHE", Path.home() / ".cache/pyllama"))
    / "peer/bin/llama-server"
)


def require_peer() -> Path:
    if not PEER.is_file():
        message = f"llama-server not built at {PEER}: run ci/build_peer.sh (CI builds it)"
        if os.environ.get("PYLLAMA_REQUIRE_PEER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return PEER


@contextlib.contextmanager
def running_peer(*args: str, timeout: float = 60) -> Iterator[str]:
    """llama-server with ``args`` on a free port; yields its base URL once healthy."""
    from helpers.servers import free_port, wait_healthy

    port = free_port()
    proc = subprocess.Popen(
        [str(require_peer()), "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)
