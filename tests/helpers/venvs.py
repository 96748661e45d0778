"""Clean virtual environments for the packaging tests, and commands that must succeed."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

__all__ = ["PIP", "new_venv", "run_ok"]

PIP = ["-m", "pip", "--disable-pip-version-check", "--no-input"]


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
