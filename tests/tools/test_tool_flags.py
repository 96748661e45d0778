"""The built-in tool options act as llama-server's: ``--tools`` picks the tools ``GET /tools``
lists, ``--agent`` turns them all on and ``--no-agent`` off again, and ``--tools-runtime``
runs a call through the container engine it names (a stand-in ``docker`` on PATH that logs
its arguments and runs the command here). Each server runs beside the peer llama-server
started the same way."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

ALL = ["read_file", "file_glob_search", "grep_search", "exec_shell_command", "write_file",
       "edit_file", "get_info"]  # fmt: skip


def _listed(url: str) -> list[str] | None:
    """The tools ``GET /tools`` names; None when the endpoint is off (403)."""
    r = httpx.get(url + "/tools", timeout=30)
    if r.status_code == 403:
        assert r.json()["error"]["type"] == "feature_disabled"
        return None
    assert r.status_code == 200, r.text
    return [t["tool"] for t in r.json()]


def _both(smollm_path: str, *flags: str, call: dict | None = None) -> list:
    """What pyllama-server and the peer answer (listed tools, and ``call``'s result)."""
    out = []
    for runner in (running_server, running_peer):
        with runner("-m", smollm_path, "-c", "256", "-t", "1", *flags) as url:
            got: list = [_listed(url)]
            if call is not None:
                r = httpx.post(url + "/tools", json=call, timeout=30)
                assert r.status_code == 200, r.text
                got.append(r.json())
            out.append(got)
    assert out[0] == out[1], out
    return out[0]


@pytest.mark.parametrize(
    ("flags", "listed"),
    [
        ([], None),
        pytest.param(
            ["--tools", "read_file,get_info"],
            ["read_file", "get_info"],
            marks=pytest.mark.flag_effect("--tools"),
        ),
        (["--agent"], ALL),
        pytest.param(["--agent", "--no-agent"], None, marks=pytest.mark.flag_effect("--no-agent")),
    ],
)
def test_the_listed_tools_as_llama_server(smollm_path: str, flags: list[str], listed) -> None:
    assert _both(smollm_path, *flags) == [listed]


@pytest.mark.parametrize(
    ("flags", "through_docker"),
    [
        ([], False),
        pytest.param(
            ["--tools-runtime", "docker-container:box1"],
            True,
            marks=pytest.mark.flag_effect("--tools-runtime"),
        ),
    ],
)
def test_tools_runtime_runs_the_call_in_the_container(
    smollm_path: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    through_docker: bool,
) -> None:
    log = tmp_path / "docker.log"
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    # `docker exec [-i] box1 CMD...`: log the call, then run CMD here
    fake.write_text(
        f'#!/bin/sh\necho "$@" >> {log}\nshift\n[ "$1" = -i ] && shift\nshift\nexec "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    call = {"tool": "exec_shell_command", "params": {"command": "echo hi"}}
    listed, result = _both(smollm_path, "--tools", "exec_shell_command", *flags, call=call)
    assert listed == ["exec_shell_command"]
    assert result == {"plain_text_response": "hi\n\n[exit code: 0]"}
    calls = log.read_text().splitlines() if log.exists() else []
    if through_docker:  # one call from each server, in the container it was told
        assert len(calls) == 2 and all(c.startswith("exec") and "box1" in c for c in calls)
    else:
        assert calls == []
