"""A pure-Python wheel from the package index, unpacked where a subprocess can import it,
without installing it or its requirements (``pip download --no-deps``, cached under
``$PYLLAMA_CACHE/wheels``). For an integration whose declared requirement would pull in
what pyllama replaces (llama-index-llms-llama-cpp requires llama-cpp-python)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from pyllama.models import cache_dir

__all__ = ["unpacked_wheel"]


def unpacked_wheel(requirement: str) -> Path:
    """The folder holding ``requirement``'s wheel unpacked (importable on PYTHONPATH)."""
    name = requirement.replace("==", "-").replace(".", "_")
    folder = cache_dir() / "wheels" / name
    if (folder / ".complete").is_file():
        return folder
    download = cache_dir() / "wheels" / "downloads"
    download.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         "-d", str(download), requirement],
        check=True, timeout=300,
    )  # fmt: skip
    stem = requirement.split("==")[0].replace("-", "_")
    version = requirement.split("==")[1]
    (wheel,) = download.glob(f"{stem}-{version}-*.whl")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(folder)
    (folder / ".complete").touch()
    return folder
