"""A real Ray cluster of several nodes on this machine, and Serve on it, for the tests.

Each node is a ``ray start`` with one CPU and one ``slot`` resource, so replicas asking for a
slot land one per node. Everything started is stopped at the end, and the end checks that no
Ray process (raylet, GCS, workers, Serve's proxy and haproxy) outlived it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from helpers.servers import free_port

__all__ = ["ray_cluster", "ray_processes", "replica_pids", "serve_on_local_cluster"]

RAY = [sys.executable, "-m", "ray.scripts.scripts"]  # the `ray` command of this Python
_NAMES = ("raylet", "gcs_server", "ray::", "haproxy", "ray/dashboard", "default_worker.py")


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def ray_processes() -> dict[int, str]:
    """Live processes that belong to Ray, by pid."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            cmd = _cmdline(int(entry.name))
            if any(n in cmd for n in _NAMES):
                out[int(entry.name)] = cmd
    return out


def replica_pids(deployment: str) -> list[int]:
    """Pids of the Serve replica actors of ``deployment`` (their process title names it)."""
    return sorted(
        pid
        for pid, cmd in ray_processes().items()
        if f"ServeReplica:default:{deployment} " in cmd + " "
    )


def _run(args: list[str], env: dict[str, str]) -> None:
    r = subprocess.run([*RAY, *args], env=env, capture_output=True, text=True, timeout=180, cwd="/")
    if r.returncode != 0:
        raise RuntimeError(f"ray {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


@contextlib.contextmanager
def ray_cluster(nodes: int = 2) -> Iterator[str]:
    """Start a head and ``nodes - 1`` workers on 127.0.0.1; yield the cluster address."""
    before = set(ray_processes())
    assert not before, f"Ray processes already running here: {sorted(before)}"
    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must stay short
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        # Serve's one proxy (on the head) sends every request to an ingress replica on its own
        # node while that one has room (10,000 requests): with a replica on each node, one
        # would carry everything. Off, the proxy spreads over both, as proxies on every node
        # of a real cluster do between them
        "RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING": "0",
    }
    port = free_port()
    address = f"127.0.0.1:{port}"
    node = ["--num-cpus=1", '--resources={"slot": 1}', "--disable-usage-stats"]
    try:
        _run(
            [
                "start",
                "--head",
                "--node-ip-address=127.0.0.1",
                f"--port={port}",
                "--include-dashboard=false",
                f"--temp-dir={tmp}",
                *node,
            ],
            env,
        )
        for _ in range(nodes - 1):
            _run(["start", f"--address={address}", "--node-ip-address=127.0.0.1", *node], env)
        yield address
    finally:
        subprocess.run([*RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
        deadline = time.monotonic() + 30
        while (left := ray_processes()) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in left:  # what `ray stop` missed is killed, and the test fails below
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
        assert not left, f"processes outlived `ray stop`: {left}"


@contextlib.contextmanager
def serve_on_local_cluster(nodes: int = 2) -> Iterator[str]:
    """Ray Serve on a ``ray_cluster(nodes)``, its one HTTP proxy on the head; yields its URL."""
    import warnings

    import ray
    from ray import serve

    with ray_cluster(nodes=nodes) as address:
        # Ray puts the driver's working directory on its workers' sys.path: from a checkout,
        # `import pyllama` there would find the source tree, which has no compiled module,
        # instead of the installed package
        here = os.getcwd()
        os.chdir("/")
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        finally:
            os.chdir(here)
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
                import gc

                gc.collect()
