"""llama.cpp's own cache directory (``fs_get_cache_directory`` on Linux): where
llama-server puts the files of ``-mu``/``--mmproj-url`` and ``-dr``, and the download that
fills it. Not the hub cache (``-hf``), which is the Hugging Face layout under ``HF_HOME``."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

__all__ = ["download_to", "llama_cache_directory"]


def llama_cache_directory() -> Path:
    """``$LLAMA_CACHE``, else ``$XDG_CACHE_HOME/llama.cpp``, else ``~/.cache/llama.cpp``."""
    for var, sub in (("LLAMA_CACHE", ""), ("XDG_CACHE_HOME", "llama.cpp")):
        base = os.environ.get(var)
        if base:
            return Path(base) / sub if sub else Path(base)
    return Path.home() / ".cache" / "llama.cpp"


def download_to(
    client: Any, url: str, target: Path, *, headers: dict[str, str] | None = None, digest: str = ""
) -> None:
    """GET ``url`` with an httpx client into ``target``, through a hidden part file renamed
    once whole (a reader never sees half a file). ``digest`` ("sha256:..."): the bytes must
    match it (ValueError). httpx errors propagate."""
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
    sha = hashlib.sha256()
    try:
        with client.stream("GET", url, headers=headers) as res:
            res.raise_for_status()
            with part.open("wb") as f:
                for chunk in res.iter_bytes(1 << 20):
                    if digest:
                        sha.update(chunk)
                    f.write(chunk)
        if digest and "sha256:" + sha.hexdigest() != digest:
            raise ValueError(f"the downloaded blob does not match its digest {digest}")
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
