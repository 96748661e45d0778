"""Clean virtual environments for the packaging tests, and commands that must succeed."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from pyllama.models import cache_dir

__all__ = ["BUILD_REQUIREMENTS", "PIP", "build_venv", "cached_venv", "new_venv", "run_ok"]

PIP = ["-m", "pip", "--disable-pip-version-check", "--no-input"]
# pyproject's build-system requirements, with CMake and Ninja from the package index
BUILD_REQUIREMENTS = ("scikit-build-core>=0.10", "pybind11>=2.13", "cmake>=3.21", "ninja")


def run_ok(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; fail the test with the end of its output unless it exits 0."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    )
    return r


def new_venv(where: Path, *requirements: str, no_compiler: bool = False) -> Path:
    """A new venv (pip and nothing else) holding ``requirements``; its bin directory.
    ``no_compiler``: pip runs with only the venv on PATH, so that anything it would have
    to compile (no wheel for this machine) fails instead of quietly building."""
    venv.create(where, with_pip=True)
    bin_dir = where / "bin"
    env = {**os.environ, "PATH": str(bin_dir)} if no_compiler else None
    if requirements:
        cmd = [str(bin_dir / "python"), *PIP, "install", "-q", *requirements]
        if no_compiler:
            cmd.append("--only-binary=:all:")
        run_ok(cmd, timeout=900, env=env)
    return bin_dir


def cached_venv(name: str, *requirements: str) -> Path:
    """A venv holding ``requirements`` at a path that stays the same between test runs
    (``$PYLLAMA_CACHE/test-venvs``, keyed by the requirements and this interpreter); its bin
    directory. For build environments: a compile's include paths are part of ccache's
    key, so pybind11's headers at a new temporary path each run recompile every binding
    source (minutes on 2 cores) where this path lets ccache answer."""
    # the interpreter's own path too: a venv links to it
    base = os.path.realpath(sys._base_executable)  # type: ignore[attr-defined]
    key = hashlib.sha256("\n".join([base, sys.version, *requirements]).encode()).hexdigest()[:12]
    root = cache_dir() / "test-venvs"
    where = root / f"{name}-{key}"
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{name}-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one creator; others wait and reuse it
        if not (where / ".complete").exists():
            shutil.rmtree(where, ignore_errors=True)  # an interrupted creation
            new_venv(where, *requirements)
            (where / ".complete").touch()
    return where / "bin"


def build_venv() -> Path:
    """The venv the packaging tests build pyllama in (``--no-build-isolation``): the build
    requirements and the package's own dependencies, at one path across runs."""
    return cached_venv("build", *BUILD_REQUIREMENTS, "numpy>=1.24", "jinja2>=3.1.6")
