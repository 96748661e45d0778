"""DRY's window (``dry_penalty_last_n``) and the repeat penalties' (``repeat_last_n``) as the
pinned llama-server has them: DRY looks back 64 tokens unless told otherwise (its
``common_params_sampling`` default; pyllama reported and used -1, the whole context), and
-1 is no value for either: a request giving it is a 400, an option giving it stops the
server. /props, an answer's generation_settings and the sampled text agree with the peer."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from helpers.peer import require_peer, running_peer
from helpers.servers import PYLLAMA_SERVER, running_server

http = httpx.Client(timeout=120)

# a repeat far more than 64 tokens back, then its start again: DRY over the whole
# context penalises continuing it, DRY over 64 tokens does not see it
FILLER = " ".join(f"item {i} is stored on shelf {i % 7}." for i in range(30))
PROMPT = "The old lighthouse keeper said the sea was calm today. " + FILLER + " The old"


@pytest.fixture(scope="module")
def servers(smollm_path: str) -> Iterator[tuple[str, str]]:
    args = ["-m", smollm_path, "-c", "512", "-np", "1", "-t", "2"]
    with running_server(*args) as ours, running_peer(*args) as peer:
        yield ours, peer


def _completion(url: str, **fields: Any) -> httpx.Response:
    body = {"prompt": PROMPT, "n_predict": 12, "temperature": 0, **fields}
    return http.post(url + "/completion", json=body)


def test_props_report_llama_servers_window(servers) -> None:
    params = [
        http.get(url + "/props").json()["default_generation_settings"]["params"] for url in servers
    ]
    assert params[0]["dry_penalty_last_n"] == params[1]["dry_penalty_last_n"] == 64
    assert params[0]["repeat_last_n"] == params[1]["repeat_last_n"] == 64


def test_a_request_without_a_window_runs_with_64(servers) -> None:
    answers = []
    for url in servers:
        r = _completion(url, dry_multiplier=2.0, dry_allowed_length=1)
        assert r.status_code == 200, r.text
        answers.append(r.json())
    ours, peer = answers
    assert ours["generation_settings"]["dry_penalty_last_n"] == 64
    assert ours["content"] == peer["content"]
    # the whole context (what -1 meant) samples other text: the window acts
    tokens = len(httpx.post(servers[0] + "/tokenize", json={"content": PROMPT}).json()["tokens"])
    wide = _completion(servers[0], dry_multiplier=2.0, dry_allowed_length=1, dry_penalty_last_n=512)
    assert tokens > 64 and wide.json()["content"] != ours["content"]


@pytest.mark.parametrize("field", ["dry_penalty_last_n", "repeat_last_n"])
def test_minus_one_is_refused_as_llama_server(servers, field: str) -> None:
    for url in servers:
        r = _completion(url, **{field: -1})
        assert r.status_code == 400, r.text
        assert field in r.json()["error"]["message"]


@pytest.mark.parametrize("flag", ["--dry-penalty-last-n", "--repeat-last-n"])
def test_minus_one_on_the_command_line_stops_both(smollm_path: str, flag: str) -> None:
    for cmd in ([str(require_peer())], PYLLAMA_SERVER):
        run = subprocess.run(
            [*cmd, "-m", smollm_path, flag, "-1", "--port", "1"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
        )
        assert run.returncode != 0
        assert f"invalid {flag[2:]} = -1" in run.stdout + run.stderr
