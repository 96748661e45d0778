#!/usr/bin/env python3
"""Fill vendor/llama.cpp from the pinned llama-cpp-python sdist.

No third-party code is committed: this script fetches the sdist with pip (the
configured index, never a hard-coded host), checks its sha256 against the pin
below, and extracts only its ``vendor/llama.cpp/`` tree. The build (CMakeLists.txt)
runs it when ``vendor/llama.cpp/CMakeLists.txt`` is missing. Standard library only,
because it also runs inside pip's isolated build environment.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"  # carries llama.cpp commit 0c1e570 (2026-10-01)
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
PREFIX = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEST = ROOT / "vendor" / "llama.cpp"


def cache_dir() -> Path:
    base = os.environ.get("PYLLAMA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyllama"
    )
    return Path(base) / "sdist"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(into: Path) -> Path:
    """Fetch the sdist with pip; reuse a cached copy whose hash matches."""
    target = into / SDIST
    if target.exists() and sha256_of(target) == SHA256:
        return target
    into.mkdir(parents=True, exist_ok=True)
    # --no-build-isolation: pip prepares the sdist's metadata with the running
    # environment instead of building its build dependencies (cmake!) from source.
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--no-build-isolation",
        "--disable-pip-version-check",
        "-d",
        str(into),
        f"{PACKAGE}=={VERSION}",
    ]
    print(f"fetch_vendor: {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, check=True)
    return target


def verified_sdist() -> Path:
    """The cached sdist, downloaded if needed, its sha256 checked against the pin."""
    archive = download(cache_dir())
    digest = sha256_of(archive)
    if digest != SHA256:
        archive.unlink()
        raise SystemExit(f"fetch_vendor: sha256 mismatch for {SDIST}: {digest} != {SHA256}")
    return archive


def extract(archive: Path, dest: Path) -> None:
    """Extract PREFIX of the archive into dest, atomically (tmp dir + rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".llama.cpp-", dir=dest.parent))
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = []
            for m in tar.getmembers():
                if not m.name.startswith(PREFIX) or m.name == PREFIX:
                    continue
                m.name = m.name[len(PREFIX) :]
                members.append(m)
            kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp, members=members, **kwargs)
        if not (tmp / "CMakeLists.txt").exists():
            raise SystemExit(f"fetch_vendor: {archive} has no {PREFIX}CMakeLists.txt")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    ap.add_argument("--force", action="store_true", help="re-extract even if present")
    ap.add_argument(
        "--print-sdist", action="store_true", help="fetch and check the sdist, print its path"
    )
    args = ap.parse_args()
    if args.print_sdist:
        print(verified_sdist())
        return 0
    if (args.dest / "CMakeLists.txt").exists() and not args.force:
        print(f"fetch_vendor: {args.dest} already filled")
        return 0
    extract(verified_sdist(), args.dest)
    print(f"fetch_vendor: llama.cpp from {PACKAGE}=={VERSION} extracted to {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
