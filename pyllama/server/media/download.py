"""--mmproj-url and --model-url: the file downloaded once into the model cache, as
llama-server keeps a --model-url download; reused from there (and required there with
--offline)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["fetch_projector", "fetch_url"]


def fetch_projector(url: str, *, offline: bool) -> str:
    return fetch_url(url, offline=offline, flag="--mmproj-url")


def fetch_url(url: str, *, offline: bool, flag: str) -> str:
    from pyllama.hub import cache_directory

    name = Path(urlsplit(url).path).name
    if not name.endswith(".gguf"):
        raise ValueError(f"{flag} must name a .gguf file: {url}")
    target = cache_directory() / name
    if target.is_file():
        return str(target)
    if offline:
        raise ValueError(f"{flag}: {name} is not in the cache ({target.parent}) and --offline")
    import httpx

    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{name}.{uuid.uuid4().hex}.part")
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=60.0) as res:
            res.raise_for_status()
            with part.open("wb") as f:
                for chunk in res.iter_bytes(1 << 20):
                    f.write(chunk)
        os.replace(part, target)
    except httpx.HTTPError as e:
        raise ValueError(f"{flag}: download failed: {e}") from e
    finally:
        part.unlink(missing_ok=True)
    return str(target)
