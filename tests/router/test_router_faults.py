"""Router faults (issue 24, deliverable 4): a child killed with SIGKILL in the middle of a
stream, and a loaded model's file replaced under its child. The client gets an error in
its protocol's framing, the router goes on, and the next request loads the model again."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.router import statuses, wait_status
from helpers.servers import SERVER_PIDS, alive, running_server


@pytest.fixture(scope="module")
def models(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fault-models")
    shutil.copyfile(smollm_path, d / "smol.gguf")  # a file of its own, to break
    return d


@pytest.fixture(scope="module")
def router(models: Path) -> Iterator[str]:
    args = ["--models-dir", str(models), "-t", "2", "-c", "1024", "-np", "1"]
    with running_server(*args) as url:
        yield url


def _child(router_pid: int) -> int:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == router_pid and fields[0] != "Z":
            return int(stat.parent.name)
    raise AssertionError("the router has no child")


def _ask(url: str) -> httpx.Response:
    body = {"model": "smol", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=120)


LONG = [{"role": "user", "content": "Count from 1 to 300, one number a line."}]
PROTOCOLS = {
    "openai": ("/v1/chat/completions", {"messages": LONG, "max_tokens": 400, "stream": True}),
    "anthropic": ("/v1/messages", {"messages": LONG, "max_tokens": 400, "stream": True}),
    "ollama": ("/api/chat", {"messages": LONG, "stream": True, "options": {"num_predict": 400}}),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_child_killed_mid_stream_ends_it_with_an_error_and_is_reloaded(
    router: str, protocol: str
) -> None:
    path, body = PROTOCOLS[protocol]
    assert _ask(router).status_code == 200  # loaded
    lines: list[str] = []
    killed = 0
    with httpx.stream("POST", router + path, json={"model": "smol", **body}, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.strip():
                lines.append(line)
            # killed at the first token: an answer that ends early (EOS) cannot beat the kill
            if len(lines) == 2 and not killed:
                killed = _child(SERVER_PIDS[router])
                os.kill(killed, signal.SIGKILL)
    assert killed, f"the stream ended before the kill: {lines}"
    last = lines[-1]
    if protocol == "openai":
        error = json.loads(last.removeprefix("data: "))["error"]
        assert error["code"] == 500 and "stopped answering" in error["message"]
    elif protocol == "anthropic":
        assert lines[-2] == "event: error"
        event = json.loads(last.removeprefix("data: "))
        assert event["type"] == "error" and "stopped answering" in event["error"]["message"]
    else:
        assert "stopped answering" in json.loads(last)["error"]
    deadline = time.monotonic() + 30
    while alive(killed):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    wait_status(router, "smol", "failed", timeout=30)  # /models says the child died
    r = _ask(router)  # loads it again
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
    assert statuses(router)["smol"] == "loaded"
    assert alive(SERVER_PIDS[router])


def test_a_model_file_replaced_under_its_child(router: str, models: Path, smollm_path: str):
    """Cut short in place, the child's mapped weights vanish (SIGBUS): that request fails,
    the reload says why, the router serves on, and once the file is whole again so does the
    model. Replaced by a rename, the child keeps its open file and serves."""
    path = models / "smol.gguf"
    assert _ask(router).status_code == 200
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)
    failed = _ask(router)  # the child dies on the missing pages
    assert failed.status_code == 500 and "error" in failed.json(), failed.text
    r = _ask(router)  # the reload of a cut file fails with the loader's reason
    assert r.status_code == 500
    assert "failed to load" in r.json()["error"]["message"], r.text
    assert alive(SERVER_PIDS[router])
    assert httpx.get(router + "/health").status_code == 200

    shutil.copyfile(smollm_path, path)  # whole again
    assert _ask(router).status_code == 200, r.text
    shutil.copyfile(smollm_path, models / "smol.new")
    os.replace(models / "smol.new", path)
    assert _ask(router).status_code == 200  # the old inode, still mapped
