"""--mmproj-url and --model-url: the file downloaded once into llama.cpp's cache directory
(``$LLAMA_CACHE``, else ``~/.cache/llama.cpp``), where llama-server keeps it; reused from
there (and required there with --offline)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

__all__ = ["fetch_projector", "fetch_url"]


def fetch_projector(url: str, *, offline: bool, path: str | None = None) -> str:
    return fetch_url(url, offline=offline, flag="--mmproj-url", path=path)


_SPLIT = re.compile(r"^(?P<prefix>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")


def fetch_url(url: str, *, offline: bool, flag: str, path: str | None = None) -> str:
    """The local file for ``url``: ``path`` when given (-m with -mu), else the URL's file
    name in llama.cpp's cache directory; downloaded unless already there. A split GGUF
    (``name-00001-of-00003.gguf``) comes with all its parts, side by side, as llama.cpp
    fetches them; the first part is returned. ValueError says what failed."""
    from pyllama.server.llama_cache import llama_cache_directory

    parsed = urlsplit(url)
    name = Path(parsed.path).name
    if not name.endswith(".gguf"):
        raise ValueError(f"{flag} must name a .gguf file: {url}")
    split = _SPLIT.match(parsed.path)
    if split is None or int(split["n"]) <= 1:
        urls = [url]
    else:
        n = int(split["n"])
        urls = [
            urlunsplit(parsed._replace(path=f"{split['prefix']}-{i:05d}-of-{n:05d}.gguf"))
            for i in range(1, n + 1)
        ]
    if path is not None and len(urls) == 1:
        targets = [Path(path)]
    else:  # the parts go beside -m's file when given (its directory), else in the cache
        where = Path(path).parent if path is not None else llama_cache_directory()
        targets = [where / Path(urlsplit(u).path).name for u in urls]
    for u, target in zip(urls, targets, strict=True):
        if target.is_file():
            continue
        if offline:
            raise ValueError(f"{flag}: {target.name} is not in {target.parent} and --offline")
        _download(u, target, flag)
    return str(targets[0])


def _download(url: str, target: Path, flag: str) -> None:
    import httpx

    from pyllama.server.llama_cache import download_to

    try:
        with httpx.Client(timeout=60.0, follow_redirects=True) as client:
            download_to(client, url, target)
    except httpx.HTTPError as e:
        raise ValueError(f"{flag}: download failed: {e}") from e
