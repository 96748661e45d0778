"""The compute-thread options act on ggml's threads as in llama-server: after a request,
the threads that computed it carry the CPU affinity (--cpu-mask, --cpu-range, one CPU each
with --cpu-strict), the scheduling policy (--prio-batch) and the nice value (--prio) that
llama-server's own threads carry for the same command line, and their number follows
--threads / --threads-batch (one thread applies no affinity). Read from
/proc/<pid>/task/*/status and stat; OpenMP's workers keep what the last compute set, so a
one-token answer (the prompt's batch is the last compute) shows the batch pool, a
two-token one the generation pool. llama-server holds more OpenMP threads, some keeping an
earlier compute's placement: what it shows must include what pyllama shows."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import httpx
import pytest

from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy

# two threads pinned to one CPU would spin-wait on each other at every barrier: OpenMP
# sleeps instead (placement is unchanged)
PASSIVE = {"OMP_WAIT_POLICY": "passive"}
Seen = frozenset[tuple[str, int, int]]  # (Cpus_allowed_list, nice, policy)
FIFO, BATCH = 1, 3  # SCHED_FIFO, SCHED_BATCH: a thread's medium (1) and low (-1) priority


def _placed(pid: int, full: str) -> Seen:
    """The (affinity, nice, policy) of each thread ggml placed (affinity or policy set)."""
    out: set[tuple[str, int, int]] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
            stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
        found = re.search(r"Cpus_allowed_list:\s*(\S+)", status)
        assert found, status
        affinity, nice, policy = found.group(1), int(stat[16]), int(stat[38])
        if affinity != full or policy != 0:  # a thread ggml placed (--prio's nice is
            # inherited by threads made after it in pyllama, not in llama-server)
            out.add((affinity, nice, policy))
    return frozenset(out)


def placed_after_requests(cmd: list[str], n_predicts: tuple[int, ...]) -> list[Seen]:
    """A server's placed threads after each completion of ``n_predicts`` tokens: one token
    leaves the prompt's batch as the last compute, two a one-token decode."""
    found = re.search(r"Cpus_allowed_list:\s*(\S+)", Path("/proc/self/status").read_text())
    assert found
    proc, url = start_process(cmd, env=PASSIVE)
    seen: list[Seen] = []
    try:
        wait_healthy(url, proc)
        for n in n_predicts:
            body = {"prompt": "The capital of France is", "n_predict": n, "temperature": 0}
            r = httpx.post(url + "/completion", json=body, timeout=60)
            assert r.status_code == 200, r.text
            seen.append(_placed(proc.pid, found.group(1)))
    finally:
        stop_process(proc)
    return seen


CASES = {  # flags -> what the computing threads carry after 1 token, after 2 tokens
    "mask": (
        ["-t", "2", "-C", "0x2", "-tb", "2", "-Crb", "0-0"],
        [{("0", 0, 0)}, {("1", 0, 0)}],
    ),
    "batch strict": (
        ["-t", "2", "-Cr", "1-1", "-tb", "2", "-Cb", "0x3", "--cpu-strict-batch", "1",
         "--prio-batch", "1"],
        [{("0", 0, FIFO), ("1", 0, FIFO)}, {("1", 0, FIFO)}],
    ),
    "strict": (
        ["-t", "2", "-C", "0x3", "--cpu-strict", "1", "--prio", "-1"],
        [{("0", 5, BATCH), ("1", 5, BATCH)}] * 2,
    ),
    "one thread": (
        ["-t", "1", "-tb", "1", "-C", "0x3", "--cpu-strict", "1", "-Cb", "0x3",
         "--cpu-strict-batch", "1"],
        [set(), set()],
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            "mask",
            marks=pytest.mark.flag_effect("--cpu-mask", "--cpu-range-batch", "--threads-batch"),
        ),
        pytest.param(
            "batch strict",
            marks=pytest.mark.flag_effect(
                "--cpu-range", "--cpu-mask-batch", "--cpu-strict-batch", "--prio-batch"
            ),
        ),
        pytest.param("strict", marks=pytest.mark.flag_effect("--cpu-strict", "--prio")),
        pytest.param("one thread", marks=pytest.mark.flag_effect("--threads", "--threads-batch")),
    ],
)
def test_compute_threads_are_placed_as_llama_servers(smollm_path: str, case: str) -> None:
    if os.sched_getaffinity(0) != {0, 1}:
        pytest.skip("the expected affinities are written for a process on CPUs 0-1 only")
    flags, expected = CASES[case]
    if "--prio-batch" in flags and os.geteuid() != 0:
        pytest.skip("a real-time policy (--prio-batch 1) needs root, as in llama-server")
    common = ["-m", smollm_path, "-c", "512", "--no-warmup", *flags]
    ours = placed_after_requests([*PYLLAMA_SERVER, *common], (1, 2))
    theirs = placed_after_requests([str(require_peer()), *common, "--no-webui"], (1, 2))
    assert ours == expected, ours
    # llama-server's extra OpenMP threads may keep an earlier compute's placement
    assert all(e <= t for e, t in zip(expected, theirs, strict=True)), theirs


# The draft context computes with its own thread counts on the model's placement (strict
# over CPUs 0-1 here: two threads show as two placed threads, one thread as none).
# llama-server attaches no threadpool to its draft context, so its draft threads carry no
# placement to compare with: it takes -td/-tbd for the counts alone, and the draft's own
# placement options (-Cd, -Crd, --cpu-strict-draft, --prio-draft and their -batch-draft
# forms) it parses and never reads. pyllama places the draft's threads with them.
DRAFT_CASES = {
    "draft threads": (["-td", "2"], [{("0", 0, 0), ("1", 0, 0)}]),
    "draft batch threads": (["-tbd", "2"], [{("0", 0, 0), ("1", 0, 0)}]),
    "one draft thread": ([], [set()]),
    "draft mask": (["-td", "2", "-Cd", "0x2"], [{("1", 0, 0)}]),
    "draft range": (["-td", "2", "-Crd", "1-1"], [{("1", 0, 0)}]),
    "draft strict": (
        ["-td", "2", "-Cd", "0x3", "--cpu-strict-draft", "0", "--prio-draft", "1"],
        [{("0-1", 0, FIFO)}],
    ),
    "draft batch": (
        ["-tbd", "2", "-Cbd", "0x2", "--cpu-strict-batch-draft", "1", "--prio-batch-draft", "1"],
        [{("1", 0, FIFO)}],
    ),
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param("draft threads", marks=pytest.mark.flag_effect("--threads-draft")),
        pytest.param("draft batch threads", marks=pytest.mark.flag_effect("--threads-batch-draft")),
        "one draft thread",
        pytest.param("draft mask", marks=pytest.mark.flag_effect("--cpu-mask-draft")),
        pytest.param("draft range", marks=pytest.mark.flag_effect("--cpu-range-draft")),
        pytest.param(
            "draft strict", marks=pytest.mark.flag_effect("--cpu-strict-draft", "--prio-draft")
        ),
        pytest.param(
            "draft batch",
            marks=pytest.mark.flag_effect(
                "--cpu-mask-batch-draft", "--cpu-strict-batch-draft", "--prio-batch-draft"
            ),
        ),
    ],
)
def test_draft_threads_are_llama_servers(smollm_path: str, case: str) -> None:
    if os.sched_getaffinity(0) != {0, 1}:
        pytest.skip("the expected affinities are written for a process on CPUs 0-1 only")
    flags, expected = DRAFT_CASES[case]
    if any(f.startswith("--prio") for f in flags) and os.geteuid() != 0:
        pytest.skip("a real-time policy (--prio-draft 1) needs root")
    common = ["-m", smollm_path, "-md", smollm_path, "--spec-type", "draft-simple", "-c", "512"]
    common += ["-t", "1", "-C", "0x3", "--cpu-strict", "1", "--no-warmup", *flags]
    ours = placed_after_requests([*PYLLAMA_SERVER, *common], (4,))
    assert ours == expected, ours


def thread_count(cmd: list[str]) -> int:
    """How many threads a server runs once healthy."""
    proc, url = start_process(cmd)
    try:
        wait_healthy(url, proc)
        time.sleep(0.3)  # threads started with the listener
        return len(list(Path(f"/proc/{proc.pid}/task").iterdir()))
    finally:
        stop_process(proc)


@pytest.mark.flag_effect("--threads-http")
def test_threads_http_sizes_a_pool_as_llama_servers(smollm_path: str) -> None:
    """llama-server starts N HTTP threads; pyllama N worker threads for blocking request
    work (pyllama/server/http/threads.py): four more threads for 5 than for 1 in both."""
    common = ["-m", smollm_path, "-c", "512", "-t", "2", "--no-warmup"]
    peer = [str(require_peer()), *common, "--no-webui"]
    ours = [thread_count([*PYLLAMA_SERVER, *common, "--threads-http", n]) for n in ("1", "5")]
    theirs = [thread_count([*peer, "--threads-http", n]) for n in ("1", "5")]
    assert ours[1] - ours[0] == theirs[1] - theirs[0] == 4, (ours, theirs)
