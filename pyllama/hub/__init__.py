"""A small client of the Hugging Face hub that shares llama.cpp's model cache.

llama-server keeps the models it downloads in the hub's own cache layout, and so does this
module, so that each finds what the other fetched::

    <cache>/models--ORG--REPO/refs/main                      the snapshot's commit
    <cache>/models--ORG--REPO/blobs/<oid>                    a file's bytes, named by hash
    <cache>/models--ORG--REPO/snapshots/<commit>/<path>      -> ../../blobs/<oid> (a link)

A model is named ``org/repo:TAG`` where TAG is the quantization at the end of the GGUF file
name (``model-Q8_0.gguf`` -> ``Q8_0``; the first shard of a split model). Which file a name
stands for, which files a listing shows and what a removal deletes follow llama.cpp's
``common/download.cpp`` and ``common/hf-cache.cpp``, so that both tools agree.

Differences from llama.cpp, on purpose: ``refs/main`` is written only once every file of a
download is complete (an interrupted download never hides the previous snapshot), LFS files
are checked against their sha256, and a removal never deletes a file outside the
repository's ``blobs`` folder, whatever a snapshot link points at."""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote

import httpx

from pyllama.hub import lock
from pyllama.hub.names import (
    SIDECARS,
    SplitInfo,
    find_best_mmproj,
    find_best_model,
    shards,
    split_info,
)

__all__ = [
    "DEFAULT_ENDPOINT",
    "CachedModel",
    "DownloadCancelled",
    "HubError",
    "SplitInfo",
    "cache_directory",
    "download",
    "find_best_mmproj",
    "find_best_model",
    "list_cached",
    "model_endpoint",
    "preset",
    "remove",
    "resolve",
    "split_info",
    "split_repo_tag",
]

DEFAULT_ENDPOINT = "https://huggingface.co/"
PARTIAL_SUFFIX = ".downloadInProgress"  # llama.cpp's name for a file being downloaded
# file names that are not a model of their own but a model's companion
PRESET_FILE = "preset.ini"  # a repository of presets, not of a model (llama.cpp's download.cpp)
ATTEMPTS = 3
CHUNK = 1 << 20
MAX_TREE_PAGES = 100

Progress = Callable[[str, int, int], None]  # (url, bytes so far, total bytes or 0)
Cancel = Callable[[], bool]


class HubError(Exception):
    """A model that cannot be found, fetched or stored; the message says why."""


class DownloadCancelled(HubError):
    pass


# ----------------------------------------------------------------------------- names


def cache_directory() -> Path:
    """The hub cache, chosen as llama.cpp's ``hf_cache::get_cache_directory`` does."""
    for var, sub in (
        ("LLAMA_CACHE", ""),
        ("HF_HUB_CACHE", ""),
        ("HUGGINGFACE_HUB_CACHE", ""),
        ("HF_HOME", "hub"),
        ("XDG_CACHE_HOME", "huggingface/hub"),
        ("USERPROFILE" if os.name == "nt" else "HOME", ".cache/huggingface/hub"),
    ):
        if base := os.environ.get(var):
            return Path(base) / sub if sub else Path(base)
    # no HOME: the account's home from the password database on POSIX (as llama.cpp),
    # the profile folder on Windows; Path.home() looks up either
    return Path.home() / ".cache/huggingface/hub"


def model_endpoint() -> str:
    """``MODEL_ENDPOINT``, else ``HF_ENDPOINT``, else the public hub; ends with a slash."""
    url = os.environ.get("MODEL_ENDPOINT") or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    return url if url.endswith("/") else url + "/"


_REPO_PART = re.compile(r"[A-Za-z0-9_]+(?:[.-][A-Za-z0-9_]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_HEX40 = re.compile(r"[0-9a-fA-F]{40}")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def valid_repo_id(repo: str) -> bool:
    """``org/name`` of letters, digits and ``_``, with ``.`` and ``-`` only between them
    (llama.cpp's ``is_valid_repo_id``): nothing that could climb out of the cache."""
    if len(repo) > 256 or repo.count("/") != 1:
        return False
    return all(_REPO_PART.fullmatch(part) for part in repo.split("/"))


def split_repo_tag(name: str) -> tuple[str, str]:
    """``org/repo[:TAG]`` -> (repo, tag or ""); ValueError with the reason otherwise."""
    repo, sep, tag = name.partition(":")
    if not valid_repo_id(repo):
        raise ValueError(f"invalid model name '{name}': expected <user>/<model>[:quant]")
    if sep and not _TAG.fullmatch(tag):
        raise ValueError(f"invalid model name '{name}': bad quantization tag '{tag}'")
    return repo, tag


def _repo_dir(repo: str) -> Path:
    return cache_directory() / ("models--" + repo.replace("/", "--"))


# ----------------------------------------------------------------------------- the cache


def _cached_commit(repo_dir: Path) -> str:
    """The commit ``refs/main`` names, else that of the first other ref."""
    refs = repo_dir / "refs"
    if not refs.is_dir():
        return ""
    fallback = ""
    for ref in sorted(refs.iterdir()):
        if not ref.is_file():
            continue
        try:
            lines = ref.read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        commit = lines[0].strip() if lines else ""
        if not _HEX40.fullmatch(commit):
            continue
        if ref.name == "main":
            return commit
        fallback = fallback or commit
    return fallback


def _cached_repos(repo: str | None = None) -> Iterator[tuple[str, Path]]:
    """(repo id, snapshot folder) of each repository in the cache, or just ``repo``'s."""
    root = cache_directory()
    if not root.is_dir():
        return
    for entry in sorted(root.iterdir()):
        if not entry.name.startswith("models--") or not (entry / "snapshots").is_dir():
            continue
        repo_id = entry.name[len("models--") :].replace("--", "/")
        if not valid_repo_id(repo_id) or (repo is not None and repo_id != repo):
            continue
        commit = _cached_commit(entry)
        snapshot = entry / "snapshots" / commit
        if commit and snapshot.is_dir():
            yield repo_id, snapshot


def _cached_files(snapshot: Path) -> dict[str, Path]:
    """Relative POSIX path -> file, for every file of a snapshot (a link that leads
    nowhere is left out: there is nothing to load behind it)."""
    out = {}
    for dirpath, _dirs, names in os.walk(snapshot):
        for name in names:
            path = Path(dirpath) / name
            if path.exists():
                out[path.relative_to(snapshot).as_posix()] = path
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class CachedModel:
    repo: str
    tag: str
    path: Path | None  # the GGUF a load of this name opens (a split model's first shard)
    mmproj: Path | None = None  # its projector, when the repository has one

    @property
    def name(self) -> str:
        return f"{self.repo}:{self.tag}"


def list_cached() -> list[CachedModel]:
    """The models in the cache, one per repository and tag, as llama.cpp lists them
    (``common_list_cached_models``): first shards whose name ends in a tag, companions
    (mmproj, MTP and other draft heads) left out."""
    out = []
    for repo, snapshot in _cached_repos():
        files = _cached_files(snapshot)
        paths = list(files)
        seen = set()
        for path in paths:
            info = split_info(path)
            if info is None or info.index != 1 or not info.tag or info.tag in seen:
                continue
            if any(word in info.prefix for word in SIDECARS):
                continue
            seen.add(info.tag)
            best = find_best_model(paths, info.tag)
            mmproj = find_best_mmproj(paths, best) if best else None
            out.append(
                CachedModel(
                    repo, info.tag, files[best] if best else None, files[mmproj] if mmproj else None
                )
            )
    return out


def resolve(name: str, hf_file: str = "") -> Path | None:
    """The cached GGUF that ``org/repo[:TAG]`` (or that repository's ``hf_file``) stands
    for, without touching the network; None when the cache does not hold it."""
    repo, tag = split_repo_tag(name)
    for _repo, snapshot in _cached_repos(repo):
        files = _cached_files(snapshot)
        if hf_file:
            return files.get(hf_file)
        best = find_best_model(list(files), tag)
        return files[best] if best else None
    return None


def projector_beside(model: Path) -> Path | None:
    """The projector the cache holds beside a cached model (what ``-hf`` loads with it,
    llama-server's ``--mmproj-auto``); None for a file outside a snapshot."""
    snapshot = next((p for p in model.parents if p.parent.name == "snapshots"), None)
    if snapshot is None:
        return None
    files = _cached_files(snapshot)
    best = find_best_mmproj(list(files), model.relative_to(snapshot).as_posix())
    return files[best] if best else None


def remove(name: str) -> bool:
    """Delete a model from the cache (llama.cpp's ``common_download_remove``): the whole
    repository without a tag; with one, the snapshot's files with that tag and the blobs
    no other file uses. True when something was removed."""
    repo, tag = split_repo_tag(name)
    repo_dir = _repo_dir(repo)
    if not tag:
        if not repo_dir.is_dir():
            return False
        shutil.rmtree(repo_dir)
        return True
    blobs = (repo_dir / "blobs").resolve()
    removed = False
    targets: set[Path] = set()
    for _repo, snapshot in _cached_repos(repo):
        for rel, path in _cached_files(snapshot).items():
            info = split_info(rel)
            if info is None or info.tag != tag.upper():
                continue
            if path.is_symlink():
                targets.add(path.resolve())
            path.unlink()
            removed = True
        # blobs that a remaining file still links to stay
        for path in _cached_files(snapshot).values():
            targets.discard(path.resolve())
    for blob in targets:
        if blob.parent == blobs:  # never a file outside the repository's blobs
            blob.unlink(missing_ok=True)
    return removed


# ----------------------------------------------------------------------------- download


@dataclass(frozen=True)
class _HubFile:
    path: str  # inside the repository
    oid: str  # the LFS sha256, else git's blob id; "" if the hub gave none
    size: int  # 0 if unknown


def _safe_relpath(path: str) -> bool:
    p = PurePosixPath(path)
    return (
        bool(path) and not p.is_absolute() and all(part not in ("", ".", "..") for part in p.parts)
    )


def _api_get(client: httpx.Client, url: str) -> httpx.Response:
    r = client.get(url, headers={"Accept": "application/json"})
    if r.status_code != 200:
        detail = r.text[:200]
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            detail = str(r.json()["error"])
        raise HubError(f"GET {url} failed ({r.status_code}): {detail}")
    return r


def _repo_commit(client: httpx.Client, base: str, repo: str) -> tuple[str, str]:
    """(branch, commit) of the repository's main branch (else its first branch)."""
    data = _api_get(client, f"{base}api/models/{repo}/refs").json()
    branches = data.get("branches") if isinstance(data, dict) else None
    if not isinstance(branches, list):
        raise HubError(f"{repo}: the hub listed no branches")
    found: tuple[str, str] | None = None
    for b in branches:
        if not isinstance(b, dict):
            continue
        name, commit = b.get("name"), b.get("targetCommit")
        if not isinstance(name, str) or not isinstance(commit, str):
            continue
        if not _HEX40.fullmatch(commit) or not _safe_relpath(name):
            continue
        if name == "main":
            return name, commit
        found = found or (name, commit)
    if found is None:
        raise HubError(f"{repo}: no valid branch")
    return found


def _repo_files(client: httpx.Client, base: str, repo: str, commit: str) -> list[_HubFile]:
    url: str | None = f"{base}api/models/{repo}/tree/{commit}?recursive=true"
    out = []
    for _ in range(MAX_TREE_PAGES):  # the hub pages long listings (Link: rel="next")
        if url is None:
            break
        r = _api_get(client, url)
        items = r.json()
        if not isinstance(items, list):
            raise HubError(f"{repo}: the file listing is not a list")
        for item in items:
            if not isinstance(item, dict) or item.get("type") != "file":
                continue
            path = item.get("path")
            if not isinstance(path, str) or not _safe_relpath(path):
                continue
            lfs = item.get("lfs")
            oid = lfs.get("oid") if isinstance(lfs, dict) else item.get("oid")
            oid = oid if isinstance(oid, str) else ""
            if oid and not (_HEX40.fullmatch(oid) or _HEX64.fullmatch(oid)):
                continue
            size = lfs.get("size") if isinstance(lfs, dict) else item.get("size")
            out.append(_HubFile(path, oid.lower(), size if isinstance(size, int) else 0))
        url = r.links.get("next", {}).get("url")
    return out


def _listing(client: httpx.Client, base: str, repo: str) -> tuple[str, str, dict[str, _HubFile]]:
    """The repository's main branch, its commit and its files by path."""
    branch, commit = _repo_commit(client, base, repo)
    return branch, commit, {f.path: f for f in _repo_files(client, base, repo, commit)}


def _link(blob: Path, final: Path) -> None:
    """Make ``final`` (in the snapshot) show ``blob``: a relative link, as the hub's own
    tools make, or the file itself moved there where links cannot be made."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        final.symlink_to(os.path.relpath(blob, final.parent))
    except FileExistsError:
        pass
    except OSError:
        os.replace(blob, final)


def _pull(
    client: httpx.Client,
    url: str,
    dest: Path,
    want: _HubFile,
    progress: Progress,
    cancel: Cancel,
) -> None:
    """Stream ``url`` into ``dest``. Bytes go to ``dest`` + PARTIAL_SUFFIX, which a retry
    resumes (HTTP Range) and which becomes ``dest`` only complete and checked."""
    partial = dest.with_name(dest.name + PARTIAL_SUFFIX)
    dest.parent.mkdir(parents=True, exist_ok=True)
    sha256 = want.oid if _HEX64.fullmatch(want.oid) else ""  # LFS ids are the sha256
    error = ""
    for attempt in range(ATTEMPTS):
        if attempt:  # 2 s, then 4 s, as llama.cpp; a cancel does not wait for it
            deadline = time.monotonic() + 2**attempt
            while time.monotonic() < deadline and not cancel():
                time.sleep(0.1)
        if cancel():
            break
        have = partial.stat().st_size if partial.exists() else 0
        digest = hashlib.sha256()
        done = total = 0
        try:
            headers = {"Range": f"bytes={have}-"} if have else {}
            with client.stream("GET", url, headers=headers) as r:
                if have and r.status_code != 206:  # no resume: start over
                    have = 0
                if r.status_code not in (200, 206) or (r.status_code == 206 and not have):
                    error = f"GET {url} failed ({r.status_code})"
                    if 400 <= r.status_code < 500 and r.status_code not in (408, 416, 429):
                        break  # will not get better by asking again
                    partial.unlink(missing_ok=True)
                    continue
                length = r.headers.get("content-length", "")
                total = have + int(length) if length.isdigit() else want.size
                if have and sha256:
                    with partial.open("rb") as f:
                        for block in iter(lambda: f.read(CHUNK), b""):
                            digest.update(block)
                done = have
                progress(url, done, total)
                with partial.open("ab" if have else "wb") as f:
                    for block in r.iter_bytes(CHUNK):
                        if cancel():
                            raise DownloadCancelled(f"download of {url} cancelled")
                        f.write(block)
                        digest.update(block)
                        done += len(block)
                        progress(url, done, total)
        except DownloadCancelled:
            partial.unlink(missing_ok=True)
            raise
        except (httpx.HTTPError, OSError) as e:
            error = f"GET {url}: {e}"
            continue
        expected = want.size or total
        if expected and done != expected:
            error = f"GET {url}: got {done} of {expected} bytes"
            continue
        if sha256 and digest.hexdigest() != sha256.lower():
            # complete but wrong: nothing to resume, and the hub would send it again
            partial.unlink(missing_ok=True)
            error = f"GET {url}: the file does not match its sha256 {sha256}"
            break
        os.replace(partial, dest)
        return
    if cancel():
        partial.unlink(missing_ok=True)
        raise DownloadCancelled(f"download of {url} cancelled")
    raise HubError(error or f"GET {url} failed")


def match_one(paths: list[str], pattern: str, repo: str) -> str:
    """The one path matching the glob ``pattern`` (by full path or file name)."""
    found = [
        p
        for p in paths
        if fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p.rsplit("/", 1)[-1], pattern)
    ]
    if len(found) != 1:
        listed = ", ".join(found or paths) or "none"
        what = "no file" if not found else f"{len(found)} files"
        raise HubError(f"{pattern!r} matches {what} in {repo}; its files: {listed}")
    return found[0]


def _client(token: str | None) -> httpx.Client:
    from pyllama import __version__

    headers = {"User-Agent": f"pyllama/{__version__}"}
    if token:
        # httpx drops this header when the hub redirects to another host (its file CDN)
        headers["Authorization"] = f"Bearer {token}"
    timeout = httpx.Timeout(30.0, connect=10.0)
    return httpx.Client(headers=headers, timeout=timeout, follow_redirects=True)


def _cached_match(name: str, filename: str) -> Path | None:
    repo, _ = split_repo_tag(name)
    for _repo, snapshot in _cached_repos(repo):
        files = _cached_files(snapshot)
        try:
            return files[match_one(list(files), filename, repo)]
        except HubError:
            return None
    return None


def _from_cache(name: str, progress: Progress, filename: str | None = None) -> Path | None:
    """A cached model's path, reported to ``progress`` as one finished file."""
    path = _cached_match(name, filename) if filename else resolve(name)
    if path is not None:
        size = path.stat().st_size
        progress(path.absolute().as_uri(), size, size)
    return path


def download(
    name: str,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    *,
    offline: bool = False,
    token: str | None = None,
    filename: str | None = None,
) -> Path:
    """Fetch ``org/repo[:TAG]`` into the cache and return the GGUF to load (a split
    model's first shard; every shard is fetched). Files already cached are not fetched
    again. ``progress(url, done, total)`` follows each file; ``cancel()`` returning True
    stops the download (DownloadCancelled). ``offline``: no network, only the cache (the
    router never passes it: its ``POST /models`` always fetches, as llama-server's does).
    ``token`` defaults to ``$HF_TOKEN``. ``filename``: a glob that must match exactly one
    of the repository's files, loaded instead of the tag's best (``Llama.from_pretrained``).
    HubError says what went wrong."""
    report: Progress = progress or (lambda url, done, total: None)
    stop: Cancel = cancel or (lambda: False)
    repo, tag = split_repo_tag(name)
    if offline:
        path = _from_cache(name, report, filename)
        if path is None:
            raise HubError(f"{name} is not in the cache ({cache_directory()}) and this is offline")
        return path
    base = model_endpoint()
    token = os.environ.get("HF_TOKEN") if token is None else token
    with _client(token) as client:
        try:
            branch, commit, by_path = _listing(client, base, repo)
        except (HubError, httpx.HTTPError, ValueError) as e:
            # as llama.cpp: a hub out of reach still leaves what the cache holds
            path = _from_cache(name, report, filename)
            if path is not None:
                return path
            raise HubError(str(e) or type(e).__name__) from e
        primary = (
            match_one(list(by_path), filename, repo)
            if filename
            else find_best_model(list(by_path), tag)
        )
        if primary is None:
            ggufs = ", ".join(p for p in by_path if p.endswith(".gguf")) or "none"
            want = f"tag {tag}" if tag else "a model"
            raise HubError(f"{repo} has no GGUF file for {want} (GGUF files: {ggufs})")
        # as llama-server's -hf: the projector beside the model comes with it
        mmproj = None if filename else find_best_mmproj(list(by_path), primary)
        rels = shards(list(by_path), primary) + ([mmproj] if mmproj else [])
        return _fetch(
            client, base, repo, (branch, commit), [by_path[r] for r in rels], report, stop
        )[0]


def _fetch(
    client: httpx.Client,
    base: str,
    repo: str,
    ref: tuple[str, str],
    files: list[_HubFile],
    report: Progress,
    stop: Cancel,
) -> list[Path]:
    """Bring ``files`` of ``repo`` at ``ref`` (branch, commit) into the cache; their paths
    in the snapshot, which the branch names only once all are there."""
    branch, commit = ref
    repo_dir = _repo_dir(repo)
    snapshot = repo_dir / "snapshots" / commit
    out = []
    for want_file in files:
        rel = want_file.path
        url = f"{base}{repo}/resolve/{commit}/{quote(rel, safe='/')}"
        final = snapshot / rel
        out.append(final)
        if final.exists():
            size = final.stat().st_size
            report(url, size, size)
            continue
        blob = repo_dir / "blobs" / want_file.oid if want_file.oid else final
        # another process may be fetching this very file: it finishes, this one takes it
        lock_name = want_file.oid or quote(f"{commit}/{rel}", safe="")
        lock_file = cache_directory() / ".locks" / repo_dir.name / f"{lock_name}.lock"
        cancelled = DownloadCancelled(f"download of {url} cancelled")
        with lock.held(lock_file, stop, cancelled):
            if not blob.exists():
                _pull(client, url, blob, want_file, report, stop)
            else:
                size = blob.stat().st_size
                report(url, size, size)
        if blob != final:
            if final.is_symlink():  # a link to a blob that is gone
                final.unlink()
            _link(blob, final)
    # the snapshot becomes the one the cache shows only now that it is whole
    ref_file = repo_dir / "refs" / branch
    ref_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref_file.with_name(f"{ref_file.name}.{os.getpid()}.tmp")  # one per process
    tmp.write_text(commit)
    os.replace(tmp, ref_file)
    return out


def preset(name: str, *, offline: bool = False, token: str | None = None) -> Path | None:
    """The ``preset.ini`` at the root of ``org/repo`` (fetched into the cache), or None when
    the repository has none: llama-server's ``-hf`` of such a repository starts a router
    over the presets it names instead of loading a model. Offline, or with the hub out of
    reach, the cached copy if any."""
    repo, _ = split_repo_tag(name)
    cached = None
    for _repo, snapshot in _cached_repos(repo):
        cached = _cached_files(snapshot).get(PRESET_FILE)
    if offline:
        return cached
    base = model_endpoint()
    token = os.environ.get("HF_TOKEN") if token is None else token
    with _client(token) as client:
        try:
            branch, commit, files = _listing(client, base, repo)
        except (HubError, httpx.HTTPError, ValueError):
            return cached
        if PRESET_FILE not in files:
            return None
        report: Progress = lambda url, done, total: None  # noqa: E731
        return _fetch(
            client, base, repo, (branch, commit), [files[PRESET_FILE]], report, lambda: False
        )[0]
