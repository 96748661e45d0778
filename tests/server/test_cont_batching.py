"""``-cb`` / ``-nocb``: with continuous batching a new prompt is evaluated beside a slot
that is generating; without it (llama-server's rule) only in a step where no slot generates,
so a short request sent while a long one streams ends after it. Both servers, both ways."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

LONG = {"prompt": "Count:", "n_predict": 160, "ignore_eos": True, "stream": True}
SHORT = {"prompt": "Hi", "n_predict": 1}


def _order(url: str) -> list[str]:
    """Which of the long stream and the short request finished first."""
    done: list[str] = []
    started = threading.Event()

    def long() -> None:
        with httpx.stream("POST", url + "/completion", json=LONG, timeout=120) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and json.loads(line[6:]).get("content"):
                    started.set()
        done.append("long")

    t = threading.Thread(target=long)
    t.start()
    assert started.wait(60)
    time.sleep(0.2)
    r = httpx.post(url + "/completion", json=SHORT, timeout=120)
    assert r.status_code == 200
    done.append("short")
    t.join()
    return done


@pytest.mark.flag_effect("-cb", "-nocb")
@pytest.mark.parametrize(("flag", "first"), [("-cb", "short"), ("-nocb", "long")])
def test_new_prompts_wait_only_without_continuous_batching(smollm_path, flag, first) -> None:
    args = ("-m", smollm_path, "-c", "1024", "-np", "2", flag)
    with running_server(*args) as ours, running_peer(*args) as peer:
        assert _order(ours)[0] == first
        assert _order(peer)[0] == first
