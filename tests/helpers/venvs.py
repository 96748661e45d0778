"""Clean virtual environments for the packaging tests, and commands that must succeed."""

from __future__ import annotations

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


def new_venv(where: Path, *requirements: str) -> Path:
    """A new venv (pip and nothing else) holding ``requirements``; its bin directory."""
    venv.create(where, with_pip=True)
    bin_dir = where / "bin"
    if requirements:
        run_ok([str(bin_dir / "python"), *PIP, "install", "-q", *requirements], timeout=900)
    return bin_dir
