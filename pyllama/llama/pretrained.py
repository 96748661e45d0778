"""``Llama.from_pretrained``: a hub repository's file, and ``additional_files`` (globs,
each matching one file of the repository), into llama.cpp's cache (the same cache and
code as ``-hf``/``-hff``); the model's path returned."""

from __future__ import annotations

from pathlib import Path

__all__ = ["fetch"]


def fetch(
    repo_id: str,
    filename: str | None,
    additional_files: list[str] | None,
    local_dir: str | None,
    cache_dir: str | None,
) -> Path:
    if not filename:
        raise ValueError("from_pretrained needs a filename (a glob matching one GGUF file)")
    if local_dir is not None or cache_dir is not None:
        raise ValueError(
            "local_dir/cache_dir are not supported: files go to llama.cpp's cache "
            "(set LLAMA_CACHE to move it)"
        )
    from pyllama._extras import require

    require("server", "Llama.from_pretrained")  # the hub client downloads with httpx
    from pyllama.hub import download

    path = download(repo_id, filename=filename)
    # beside the model in the same cache (a projector, a draft model...); a split model's
    # other shards come with its first without being named
    for pattern in additional_files or ():
        download(repo_id, filename=pattern)
    return path
