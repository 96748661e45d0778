"""``-dr/--docker-repo [<repo>/]<model>[:quant]``: a GGUF from Docker Hub's model registry,
as llama.cpp's ``common_docker_resolve_model``: ``ai/`` when no namespace is given, tag
``latest`` by default, the image manifest's GGUF layer fetched into llama.cpp's cache file
``<repo with _>_<tag>.gguf`` (``$LLAMA_CACHE``, else ``~/.cache/llama.cpp``) and checked
against its sha256 digest. A file already there is used as it is (``--offline`` uses only
that). ``$DOCKER_REGISTRY_URL``/``$DOCKER_AUTH_URL`` point at a mirror."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pyllama.server.llama_cache import download_to, llama_cache_directory

__all__ = ["cache_file", "resolve", "split_docker_repo"]

REGISTRY = "https://registry-1.docker.io"
AUTH = "https://auth.docker.io/token"
_DIGEST = re.compile(r"^sha256:([a-fA-F0-9]{64})$")
_MANIFESTS = "application/vnd.docker.distribution.manifest.v2+json,application/vnd.oci.image.manifest.v1+json"


def split_docker_repo(value: str) -> tuple[str, str]:
    """(repository, tag): ``smollm2`` is ``ai/smollm2:latest``."""
    repo, _, tag = value.partition(":")
    if not repo:
        raise ValueError(f"--docker-repo: expected [<repo>/]<model>[:quant], got '{value}'")
    if "/" not in value:
        repo = "ai/" + repo
    return repo, tag or "latest"


def cache_file(repo: str, tag: str) -> Path:
    return llama_cache_directory() / f"{repo.replace('/', '_')}_{tag}.gguf"


def resolve(value: str, *, offline: bool) -> str:
    """The local GGUF for ``value``, fetched first unless cached. ValueError says why not."""
    repo, tag = split_docker_repo(value)
    target = cache_file(repo, tag)
    if target.is_file():
        return str(target)
    if offline:
        raise ValueError(f"--docker-repo {value}: {target} is not in the cache and --offline")
    import httpx

    registry = os.environ.get("DOCKER_REGISTRY_URL", REGISTRY).rstrip("/")
    try:
        with httpx.Client(timeout=60.0, follow_redirects=True) as client:
            auth = os.environ.get("DOCKER_AUTH_URL", AUTH)
            token = client.get(
                auth, params={"service": "registry.docker.io", "scope": f"repository:{repo}:pull"}
            )
            token.raise_for_status()
            headers = {"Authorization": f"Bearer {token.json()['token']}"}
            manifest = client.get(
                f"{registry}/v2/{repo}/manifests/{tag}", headers={**headers, "Accept": _MANIFESTS}
            )
            if manifest.status_code != 200:
                raise ValueError(
                    f"Failed to get Docker manifest, HTTP code: {manifest.status_code}"
                )
            digest = _gguf_digest(manifest.json())
            url = f"{registry}/v2/{repo}/blobs/{digest}"
            download_to(client, url, target, headers=headers, digest=digest)
    except (httpx.HTTPError, KeyError, TypeError) as e:
        raise ValueError(f"--docker-repo {value}: download failed: {e}") from e
    except ValueError as e:
        raise ValueError(f"--docker-repo {value}: {e}") from e
    return str(target)


def _gguf_digest(manifest: dict) -> str:
    for layer in manifest.get("layers") or []:
        if "gguf" in str(layer.get("mediaType", "")):
            digest = str(layer.get("digest", ""))
            if not _DIGEST.match(digest):
                raise ValueError(f"Invalid OCI digest format received in manifest: {digest}")
            return digest.lower()
    raise ValueError("No GGUF layer found in Docker manifest")
