"""--numa acts as in llama-server. ggml does nothing with it on a machine of one NUMA node
(every placement in ggml-cpu.c waits for ggml_is_numa(): more than one node in
/sys/devices/system/node), so each server here runs in a mount namespace (``unshare``, as
an unprivileged user too) where that folder shows two nodes, cpu0 on node0 and cpu1 on
node1; the CPUs and the kernel are the real ones. Then ggml pins each compute thread as its
strategy says (distribute: thread i on node i % 2; isolate: the node the process started
on; numactl: the CPUs the process was started with) and gives the calling thread every CPU
back after each graph. The test reads each thread's Cpus_allowed_list after a request:
with the option it differs from without, and matches llama-server's for the same command
line in the same namespace."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy

NODES = "/sys/devices/system/node"
TWO_NODES = (
    f'mount -t tmpfs numa {NODES} && mkdir -p {NODES}/node0/cpu0 {NODES}/node1/cpu1 && exec "$@"'
)
IN_TWO_NODES = ["unshare", "--mount", "--map-root-user", "sh", "-c", TWO_NODES, "sh"]
# two threads pinned to one CPU (isolate) would spin-wait on each other: OpenMP sleeps
PASSIVE = {"OMP_WAIT_POLICY": "passive"}


def _cannot_fake_two_nodes() -> str | None:
    if not {0, 1} <= os.sched_getaffinity(0):
        return "needs CPUs 0 and 1"
    try:
        run = subprocess.run(
            [*IN_TWO_NODES, "ls", NODES], capture_output=True, text=True, timeout=30
        )
    except FileNotFoundError:
        return "unshare (util-linux) is not installed"
    if run.returncode != 0 or run.stdout.split() != ["node0", "node1"]:
        return f"cannot mount a two-node {NODES} in a namespace: {run.stderr.strip()}"
    return None


_reason = _cannot_fake_two_nodes()
pytestmark = pytest.mark.skipif(_reason is not None, reason=f"--numa effect test: {_reason}")


def affinities(server: list[str], cpus: str) -> frozenset[str]:
    """The Cpus_allowed_list of every thread of ``server`` (started on ``cpus`` in the
    two-node namespace) after one request."""
    cmd = [*IN_TWO_NODES, "taskset", "-c", cpus, *server, "-c", "512", "-np", "1", "-t", "2"]
    proc, url = start_process(cmd, env=PASSIVE)
    try:
        wait_healthy(url, proc)
        body = {"prompt": "The capital of France is", "n_predict": 2, "temperature": 0}
        assert httpx.post(url + "/completion", json=body, timeout=60).status_code == 200
        seen = set()
        for task in Path(f"/proc/{proc.pid}/task").iterdir():
            try:
                status = (task / "status").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that ended meanwhile
            found = re.search(r"Cpus_allowed_list:\s*(\S+)", status)
            assert found, status
            seen.add(found.group(1))
    finally:
        stop_process(proc)
    return frozenset(seen)


@pytest.fixture(scope="module")
def without(smollm_path: str) -> dict[str, frozenset[str]]:
    """pyllama-server without --numa, on both CPUs and on cpu1 alone."""
    return {cpus: affinities([*PYLLAMA_SERVER, "-m", smollm_path], cpus) for cpus in ("0,1", "1")}


@pytest.mark.flag_effect("--numa")
@pytest.mark.parametrize(
    ("strategy", "cpus", "pinned"),
    [
        ("distribute", "0,1", "1"),  # thread 1 on node1
        ("isolate", "0,1", "0"),  # both on node0, where the process started
        ("numactl", "1", None),  # on cpu1 as started; the caller gets every CPU back
    ],
)
def test_numa_places_the_compute_threads_as_llama_server(
    smollm_path: str,
    without: dict[str, frozenset[str]],
    strategy: str,
    cpus: str,
    pinned: str | None,
) -> None:
    model = ["-m", smollm_path, "--numa", strategy]
    ours = affinities([*PYLLAMA_SERVER, *model], cpus)
    theirs = affinities([str(require_peer()), *model], cpus)
    assert ours == theirs
    assert ours != without[cpus]
    if pinned is not None:
        assert pinned in ours and pinned not in without[cpus]
