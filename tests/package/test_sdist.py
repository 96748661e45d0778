"""The sdist is self-contained: it carries the llama.cpp sources the build compiles, with
their license texts and without models, tests, docs or the web UI, and it builds a working
wheel with the network cut (as a conda-forge build, a distro package or an offline machine
builds it).

The build requirements go into a venv first (that step uses the package index); the
build itself then runs in a network namespace with no interfaces (``unshare -n``), or,
where that is not allowed, with pip's index off and every proxy pointing at a closed
port. With ccache the compile reuses the checkout's objects (paths are relative to the
source tree, and the build venv stays at one path), so this costs about a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from helpers.venvs import PIP, build_venv, run_ok

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"


def _offline(cmd: list[str]) -> tuple[list[str], dict[str, str]]:
    """``cmd`` as it runs with no network: in a new network namespace when this user may
    make one, else with the index off and proxies that lead nowhere."""
    env = {**os.environ, "PIP_NO_INDEX": "1"}
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-n", *cmd], env
    dead = "http://127.0.0.1:9"
    return cmd, {**env, "HTTP_PROXY": dead, "HTTPS_PROXY": dead, "ALL_PROXY": dead}


@pytest.fixture(scope="module")
def build_env() -> Path:
    """A venv holding the build requirements and the package's own dependencies, at the
    same path each run (ccache then reuses the bindings' objects; see cached_venv). The
    wheel built from the sdist installs into it: each build replaces the one before."""
    return build_venv() / "python"


@pytest.fixture(scope="module")
def sdist(build_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    code = f"from scikit_build_core.build import build_sdist; build_sdist({str(out)!r})"
    run_ok([str(build_env), "-c", code], cwd=ROOT)
    (built,) = out.glob("pyllama_engine-*.tar.gz")
    return built


def test_the_sdist_carries_the_pruned_llama_cpp_sources(sdist: Path):
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    vendor = "vendor/llama.cpp/"
    for needed in (
        "CMakeLists.txt",
        "LICENSE",
        "licenses/LICENSE-jsonhpp",
        "src/llama.cpp",
        "ggml/src/ggml.c",
        "common/json-schema-to-grammar.cpp",
        "include/llama.h",
        "tools/mtmd/CMakeLists.txt",
        # llama-server's chat request side, compiled into _core (pyllama-server-chat)
        "tools/server/server-common.cpp",
        "tools/server/server-chat.cpp",
        "tools/server/server-task.cpp",
    ):
        assert vendor + needed in names, needed
    for pruned in ("models/", "tests/", "docs/", "examples/", "tools/ui/"):
        assert not any(n.startswith(vendor + pruned) for n in names), pruned
    # of the server only its sources: not its tests, web UI or bench
    server = [n for n in names if n.startswith(vendor + "tools/server/")]
    assert all(n.rsplit("/", 1)[1].startswith("server-") for n in server), server
    assert sdist.stat().st_size < 20 << 20


def test_the_sdist_carries_the_chat_page(sdist: Path):
    """pyllama/webui/ is package data: plain files, no build step, in the sdist as is."""
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    page = {f"pyllama/webui/{p.name}" for p in (ROOT / "pyllama" / "webui").iterdir()}
    assert "pyllama/webui/index.html" in page
    assert sorted(page - names) == []


def test_the_sdist_builds_offline_and_generates(
    sdist: Path, build_env: Path, tmp_path: Path, smollm_path: str
):
    wheels = tmp_path / "wheels"
    cmd, env = _offline(
        [
            str(build_env),
            *PIP,
            "wheel",
            "--no-index",
            "--no-build-isolation",
            "--no-deps",
            "-v",
            "-w",
            str(wheels),
            str(sdist),
        ]
    )
    r = run_ok(cmd, env=env, cwd=tmp_path, timeout=3600)
    assert "vendor/llama.cpp missing" not in r.stdout  # nothing was fetched
    (wheel,) = wheels.glob("pyllama_engine-*.whl")
    install = [str(build_env), *PIP, "install", "--no-index", "--no-deps", "--force-reinstall"]
    run_ok([*install, str(wheel)], cwd=tmp_path)
    code = (
        "import sys, pyllama\n"
        "llm = pyllama.Llama(sys.argv[1], n_ctx=256, n_threads=2, verbose=False)\n"
        "out = llm.create_completion(sys.argv[2], max_tokens=12, temperature=0)\n"
        "print(out['choices'][0]['text'])"
    )
    from_sdist = run_ok([str(build_env), "-c", code, smollm_path, PROMPT], cwd=tmp_path).stdout
    here = run_ok([sys.executable, "-c", code, smollm_path, PROMPT], cwd=tmp_path).stdout
    assert from_sdist == here and from_sdist.strip()
