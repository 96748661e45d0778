"""Two processes fetching one file into one cache (two replicas on a node, or pods on a
shared volume) end with one good file: the second waits for the first's download and
takes its result, instead of writing into the same partial file."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from helpers.fake_hub import FakeFile, FakeHub, FakeRepo

REPO = "test-org/shared-GGUF"
SIZE = 6 << 20
FETCH = "from pyllama import hub; print(hub.download('" + REPO + "'))"


def _wait(what: str, ok: Callable[[], bool], procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 120
    while not ok():
        for p in procs:
            assert p.poll() is None, f"exited ({p.returncode}) before {what}: {p.stderr}"
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)


def test_two_processes_one_download(tmp_path: Path) -> None:
    data = os.urandom(SIZE)
    hub = FakeHub()
    hold = threading.Event()
    hub.repos[REPO] = FakeRepo({"shared-Q8_0.gguf": FakeFile(data)}, hold=hold)
    env = {**os.environ, "LLAMA_CACHE": str(tmp_path / "cache"), "HF_ENDPOINT": hub.url}
    env.update(HF_TOKEN="", MODEL_ENDPOINT="")

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            # from tmp_path: the installed pyllama, not the source tree's
            [sys.executable, "-c", FETCH], env=env, text=True, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def seen(part: str) -> int:
        return sum(part in s.path for s in list(hub.requests))

    try:
        first = start()
        _wait("the first download", lambda: seen("/cdn/") >= 1, [first])  # held after its first MiB
        second = start()
        _wait("the second listing", lambda: seen("/tree/") >= 2, [first, second])
        # a second GET of the bytes would come at once; give it the time to show
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and seen("/cdn/") < 2:
            time.sleep(0.05)
        hold.set()
        outs = [p.communicate(timeout=300) for p in (first, second)]
    finally:
        hold.set()
        hub.close()
    for p, (_, err) in zip((first, second), outs, strict=True):
        assert p.returncode == 0, err
    paths = {Path(out.strip()) for out, _ in outs}
    assert len(paths) == 1
    (path,) = paths
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(data).digest()
    assert seen("/cdn/") == 1  # the second took the first's file
    left = [p.name for p in (tmp_path / "cache").rglob("*") if p.name.endswith(".partial")]
    assert not left
