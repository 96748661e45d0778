"""Faults injected into a running pyllama-server (issue 24, deliverable 4): a slot file cut
short before its restore, a full disk under --slot-save-path and --log-file (``/dev/full``:
every write fails with ENOSPC), SIGTERM in the middle of a long prompt. The router's faults
(a child killed mid-stream, its model file replaced) are in tests/router/test_router_faults.py."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from helpers.servers import (
    PYLLAMA_SERVER,
    SERVER_PIDS,
    alive,
    running_server,
    start_process,
    wait_healthy,
)


@pytest.fixture(scope="module")
def slot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slots")


@pytest.fixture(scope="module")
def server(smollm_path: str, slot_dir: Path):
    args = ["-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1"]
    with running_server(*args, "--slot-save-path", str(slot_dir)) as url:
        yield url


def _fill_slot(url: str) -> None:
    body = {"prompt": "The capital of France is", "n_predict": 4, "id_slot": 0}
    assert httpx.post(url + "/completion", json=body, timeout=60).status_code == 200


def _serves(url: str) -> None:
    r = httpx.post(url + "/completion", json={"prompt": "Hello", "n_predict": 2}, timeout=60)
    assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
    assert alive(SERVER_PIDS[url])


@pytest.mark.parametrize("keep", [0.5, 0.02, 0.0], ids=["half", "header only", "empty"])
def test_a_truncated_slot_file_is_refused_on_restore(server: str, slot_dir: Path, keep: float):
    _fill_slot(server)
    r = httpx.post(server + "/slots/0?action=save", json={"filename": "cut.bin"})
    assert r.status_code == 200, r.text
    path = slot_dir / "cut.bin"
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(int(size * keep))
    r = httpx.post(server + "/slots/0?action=restore", json={"filename": "cut.bin"})
    assert r.status_code == 400, r.text
    assert "cut.bin" in r.json()["error"]["message"]
    slot = httpx.get(server + "/slots").json()[0]
    assert slot["n_ctx"] == 1024 and not slot["is_processing"]
    _serves(server)


def test_a_full_disk_under_the_slot_directory(server: str, slot_dir: Path):
    """The save fails with the OS's reason as a 500 (the client asked nothing wrong), leaves
    no partial file, and the slot and the server go on."""
    _fill_slot(server)
    (slot_dir / "full.bin").symlink_to("/dev/full")  # a file on a disk with no room
    r = httpx.post(server + "/slots/0?action=save", json={"filename": "full.bin"})
    assert r.status_code == 500, r.text
    assert "No space left on device" in r.json()["error"]["message"]
    assert not (slot_dir / "full.bin").exists()
    r = httpx.post(server + "/slots/0?action=save", json={"filename": "room.bin"})
    assert r.status_code == 200 and (slot_dir / "room.bin").stat().st_size == r.json()["n_written"]
    _serves(server)


def test_a_full_disk_under_the_log_file(smollm_path: str):
    """Every log line fails to be written: the server says so once on stderr and serves."""
    err = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    args = ["-m", smollm_path, "-t", "2", "-c", "512", "-v", "--log-file", "/dev/full"]
    proc, url = start_process([*PYLLAMA_SERVER, *args], stderr=err)
    try:
        wait_healthy(url, proc)
        for _ in range(5):
            r = httpx.post(url + "/completion", json={"prompt": "Hi", "n_predict": 4}, timeout=60)
            assert r.status_code == 200
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        err.seek(0)
        said = err.read().decode(errors="replace")
        err.close()
    assert proc.returncode == 0
    assert said.count("No space left on device") == 1, said[-3000:]


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            pass
    return out


def test_sigterm_during_a_long_prompt_exits_zero_in_time(smollm_path: str):
    """SIGTERM while a 3,000-token prompt is being evaluated: the process ends with 0 within
    uvicorn's 5 s graceful shutdown (plus the engine's stop), leaving no process behind."""
    proc, url = start_process([*PYLLAMA_SERVER, "-m", smollm_path, "-t", "2", "-c", "4096"])
    answer: list[object] = []
    try:
        wait_healthy(url, proc)
        body = {"prompt": "the quick brown fox " * 750, "n_predict": 8}

        def ask() -> None:
            try:
                answer.append(httpx.post(url + "/completion", json=body, timeout=60).status_code)
            except httpx.HTTPError as e:
                answer.append(type(e).__name__)

        client = threading.Thread(target=ask)
        client.start()
        deadline = time.monotonic() + 30
        while not any(s["is_processing"] for s in httpx.get(url + "/slots").json()):
            assert time.monotonic() < deadline, "the prompt never started"
            time.sleep(0.05)
        children = _children(proc.pid)
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        took = time.monotonic() - t0
        # uvicorn's 5 s graceful wait, then the engine's stop: 6 to 9 s measured on an idle
        # 2-core VM, more on a busy one; a stop that hangs fails the 30 s wait above
        assert took < 15, f"took {took:.1f} s to stop"
        client.join(30)
        assert answer, "the client never got an answer or an error"
        assert not [c for c in children if alive(c)]
    finally:
        if proc.poll() is None:
            proc.kill()
