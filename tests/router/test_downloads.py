"""Hub downloads into llama.cpp's cache (pyllama.hub) and the router's management API:
``POST /models`` (download), ``GET /models/sse`` (events), ``DELETE /models`` (removal),
``--offline``. A local HTTP server (tests/helpers/fake_hub.py) stands in for the hub (the only
stand-in: the real hub is out of reach); everything else is the real client, cache and
router process."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pyllama import hub

from helpers.fake_hub import COMMIT, FakeFile, FakeHub, FakeRepo, commit_for
from helpers.router import listing, statuses, wait_status
from helpers.servers import running_server

TOKEN = "hf_" + "t" * 34
MODEL = "test-org/tiny-GGUF:Q8_0"


# ------------------------------------------------------------------------------ fake hub


@pytest.fixture(scope="module")
def fake_hub(smollm_path: str) -> Iterator[FakeHub]:
    h = FakeHub()
    h.repos["test-org/tiny-GGUF"] = FakeRepo(
        {
            "README.md": FakeFile(b"# tiny\n", lfs=False),
            "tiny-F16.gguf": FakeFile(b"GGUF not this one"),  # the listing has it first
            "tiny-Q8_0.gguf": FakeFile(Path(smollm_path)),
            # no projector: a download would fetch it and the child load it (see below)
        },
        delay=0.03,  # ~3 s for the demo model: long enough to see it downloading
    )
    yield h
    h.close()


def _blob(n: int, seed: int = 0) -> bytes:
    return bytes((i * 131 + seed) % 251 for i in range(n))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_hub: FakeHub) -> Path:
    """This process's hub cache and endpoint, for the tests of pyllama.hub itself."""
    root = tmp_path / "hub-cache"
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "MODEL_ENDPOINT", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LLAMA_CACHE", str(root))
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    return root


def _snapshot(root: Path, repo: str, files: dict[str, bytes], commit: str = COMMIT) -> Path:
    """A repository in the hub cache's layout, as llama-server leaves it: snapshot files
    linking to blobs named by hash."""
    repo_dir = root / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    snap = repo_dir / "snapshots" / commit
    for name, data in files.items():
        blob = repo_dir / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        target = snap / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(os.path.relpath(blob, target.parent))
    return snap


# ------------------------------------------------------------------------ pyllama.hub


def test_cache_directory_and_endpoint_follow_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["LLAMA_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"]
    for var in names:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", "/h")
    assert hub.cache_directory() == Path("/h/.cache/huggingface/hub")
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert hub.cache_directory() == Path("/x/huggingface/hub")
    monkeypatch.setenv("HF_HOME", "/hf")
    assert hub.cache_directory() == Path("/hf/hub")
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", "/old")
    assert hub.cache_directory() == Path("/old")
    monkeypatch.setenv("HF_HUB_CACHE", "/new")
    assert hub.cache_directory() == Path("/new")
    monkeypatch.setenv("LLAMA_CACHE", "")  # empty counts as unset, as in llama.cpp
    assert hub.cache_directory() == Path("/new")
    monkeypatch.setenv("LLAMA_CACHE", "/l")
    assert hub.cache_directory() == Path("/l")

    for var in ("MODEL_ENDPOINT", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    assert hub.model_endpoint() == hub.DEFAULT_ENDPOINT
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror:1")
    assert hub.model_endpoint() == "http://mirror:1/"
    monkeypatch.setenv("MODEL_ENDPOINT", "http://models:2/")
    assert hub.model_endpoint() == "http://models:2/"


def test_names_tags_and_file_choice() -> None:
    assert hub.split_repo_tag("org/repo:Q4_K_M") == ("org/repo", "Q4_K_M")
    assert hub.split_repo_tag("org-1/re.po_2") == ("org-1/re.po_2", "")
    for bad in ("repo", "a/b/c", "../x", "a/-b", "a/b:", "a/b:c:d", "a//b", "a/b:Q4 K", ""):
        with pytest.raises(ValueError):
            hub.split_repo_tag(bad)

    info = hub.split_info("sub/model-Q4_K_M-00002-of-00003.gguf")
    assert info == hub.SplitInfo("sub/model-Q4_K_M", "Q4_K_M", 2, 3)
    assert hub.split_info("SmolLM2-135M-Instruct.q4_1.gguf").tag == "Q4_1"
    assert hub.split_info("README.md") is None

    files = [
        "mmproj-model-Q8_0.gguf",
        "model-F16.gguf",
        "model-Q8_0-00002-of-00002.gguf",
        "model-Q8_0-00001-of-00002.gguf",
        "model.imatrix-Q4_K_M.gguf",
    ]
    # no tag: Q4_K_M, then Q8_0 (first shard, never a projector or an imatrix)
    assert hub.find_best_model(files, "") == "model-Q8_0-00001-of-00002.gguf"
    assert hub.find_best_model(files, "f16") == "model-F16.gguf"
    assert hub.find_best_model(files, "Q2_K") is None
    assert hub.find_best_model(["a-F16.gguf", "b-BF16.gguf"], "") == "a-F16.gguf"


def test_list_resolve_and_remove_a_cache(cache: Path, tmp_path: Path) -> None:
    one, two = _blob(100, 1), _blob(100, 2)
    snap = _snapshot(
        cache,
        "org/split-GGUF",
        {
            "Q8_0/model-Q8_0-00001-of-00002.gguf": one,
            "Q8_0/model-Q8_0-00002-of-00002.gguf": two,
            "model-F16.gguf": one,  # the same bytes as a shard: one blob for both
            "mmproj-model-F16.gguf": _blob(10),
            "mtp-model-Q8_0.gguf": _blob(11),
            "notag.gguf": _blob(12),
            "README.md": b"hi",
        },
    )
    _snapshot(cache, "org/other", {"other-Q4_0.gguf": _blob(5)})
    (cache / "models--org--noref" / "snapshots" / COMMIT).mkdir(parents=True)
    (cache / "models--bad..name--x" / "snapshots").mkdir(parents=True)
    (cache / "models--org--noref" / "snapshots" / COMMIT / "x-Q8_0.gguf").write_bytes(b"x")

    listed = {m.name: m.path for m in hub.list_cached()}
    assert listed == {
        "org/other:Q4_0": cache / "models--org--other" / "snapshots" / COMMIT / "other-Q4_0.gguf",
        "org/split-GGUF:F16": snap / "model-F16.gguf",
        "org/split-GGUF:Q8_0": snap / "Q8_0" / "model-Q8_0-00001-of-00002.gguf",
    }
    assert hub.resolve("org/split-GGUF") == snap / "Q8_0/model-Q8_0-00001-of-00002.gguf"
    assert hub.resolve("org/split-GGUF:f16") == snap / "model-F16.gguf"
    assert hub.resolve("org/split-GGUF", "notag.gguf") == snap / "notag.gguf"
    assert hub.resolve("org/split-GGUF:Q2_K") is None
    assert hub.resolve("org/absent:Q8_0") is None

    blobs = cache / "models--org--split-GGUF" / "blobs"
    # a tag's files go, and the blobs nothing else uses; a blob still used stays
    assert hub.remove("org/split-GGUF:Q8_0")
    assert not (snap / "Q8_0" / "model-Q8_0-00001-of-00002.gguf").exists()
    assert (blobs / hashlib.sha256(one).hexdigest()).exists()  # model-F16 uses it
    assert not (blobs / hashlib.sha256(two).hexdigest()).exists()
    assert not os.path.lexists(snap / "mtp-model-Q8_0.gguf")  # its tag is Q8_0 too
    assert {m.name for m in hub.list_cached()} == {"org/other:Q4_0", "org/split-GGUF:F16"}
    assert not hub.remove("org/split-GGUF:Q8_0")

    # a snapshot link to a file outside the cache: the link goes, never the file
    outside = tmp_path / "mine-Q4_0.gguf"
    outside.write_bytes(b"precious")
    (snap / "mine-Q4_0.gguf").symlink_to(outside)
    assert hub.remove("org/split-GGUF:Q4_0")
    assert outside.read_bytes() == b"precious"

    # no tag: the whole repository
    assert hub.remove("org/split-GGUF")
    assert not (cache / "models--org--split-GGUF").exists()
    assert [m.name for m in hub.list_cached()] == ["org/other:Q4_0"]
    assert not hub.remove("org/split-GGUF")


def test_download_into_the_cache(
    cache: Path, fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _blob(3 << 20, 7)
    fake_hub.repos["test-org/small-GGUF"] = FakeRepo(
        {
            "small-F16.gguf": FakeFile(_blob(1000, 3)),
            "sub/small-Q8_0.gguf": FakeFile(data),
            "notes.txt": FakeFile(b"x", lfs=False),
            "mmproj-small-F16.gguf": FakeFile(b"GGUF a projector"),  # comes with the model
            "other/mmproj-x-F16.gguf": FakeFile(b"GGUF not beside it"),
        }
    )
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    seen: list[tuple[str, int, int]] = []
    n = len(fake_hub.requests)
    path = hub.download("test-org/small-GGUF", lambda *a: seen.append(a))  # default tag: Q8_0
    snap = cache / "models--test-org--small-GGUF" / "snapshots" / COMMIT
    assert path == snap / "sub" / "small-Q8_0.gguf"
    assert path.read_bytes() == data
    assert path.is_symlink()  # -> ../../../blobs/<sha256>, as the hub's tools make it
    blob = cache / "models--test-org--small-GGUF" / "blobs" / hashlib.sha256(data).hexdigest()
    assert path.resolve() == blob.resolve()
    refs = cache / "models--test-org--small-GGUF" / "refs" / "main"
    assert refs.read_text() == COMMIT
    assert not (snap / "small-F16.gguf").exists() and not (snap / "notes.txt").exists()
    assert not list(cache.rglob("*" + hub.PARTIAL_SUFFIX))
    # progress: the model, growing to its size, then its projector (llama-server's -hf)
    base = f"{fake_hub.url}/test-org/small-GGUF/resolve/{COMMIT}/"
    urls = {u for u, _, _ in seen}
    assert urls == {base + "sub/small-Q8_0.gguf", base + "mmproj-small-F16.gguf"}
    dones = [d for u, d, _ in seen if u.endswith("small-Q8_0.gguf")]
    assert dones == sorted(dones) and dones[-1] == len(data)
    assert (snap / "mmproj-small-F16.gguf").read_bytes() == b"GGUF a projector"
    assert not (snap / "other").exists()
    # the token went to the hub with each request
    assert all(s.headers.get("authorization") == f"Bearer {TOKEN}" for s in fake_hub.requests[n:])
    # llama-server would find it under its own name
    assert {m.name: m.path for m in hub.list_cached()} == {"test-org/small-GGUF:Q8_0": path}
    assert hub.list_cached()[0].mmproj == snap / "mmproj-small-F16.gguf"

    # a second download fetches nothing: the file is in the cache
    n = len(fake_hub.requests)
    assert hub.download("test-org/small-GGUF:Q8_0") == path
    assert not [p for p in fake_hub.paths()[n:] if "/cdn/" in p]
    # offline: the cache only, no request at all
    n = len(fake_hub.requests)
    assert hub.download("test-org/small-GGUF:q8_0", offline=True) == path
    with pytest.raises(hub.HubError, match="not in the cache"):
        hub.download("test-org/small-GGUF:F16", offline=True)
    assert len(fake_hub.requests) == n
    # an explicit tag that the repository lacks
    with pytest.raises(hub.HubError, match="no GGUF file for tag Q2_K"):
        hub.download("test-org/small-GGUF:Q2_K")


def test_download_resumes_checks_and_cancels(cache: Path, fake_hub: FakeHub) -> None:
    data = _blob(4 << 20, 9)
    parts = {
        "big-Q4_0-00001-of-00002.gguf": FakeFile(data[: 2 << 20]),
        "big-Q4_0-00002-of-00002.gguf": FakeFile(data[2 << 20 :]),
    }
    fake_hub.repos["test-org/flaky-GGUF"] = FakeRepo(parts, cut_once=set(parts))
    n = len(fake_hub.requests)
    path = hub.download("test-org/flaky-GGUF:Q4_0")
    assert path.name == "big-Q4_0-00001-of-00002.gguf"  # every shard is fetched
    assert path.read_bytes() + path.with_name("big-Q4_0-00002-of-00002.gguf").read_bytes() == data
    # each shard was cut half-way once and resumed from where it stopped
    ranges = [s.headers.get("range") for s in fake_hub.requests[n:] if s.path.startswith("/cdn/")]
    assert len(ranges) == 4 and ranges[0] is None and ranges[2] is None
    for r in (ranges[1], ranges[3]):
        assert r is not None and r.startswith("bytes=") and 0 < int(r[6:-1]) <= 1 << 20

    # bytes that do not match the listed sha256: no file, nothing half-written kept
    fake_hub.repos["test-org/corrupt-GGUF"] = FakeRepo(
        {"c-Q8_0.gguf": FakeFile(data, bad_sha=True)}
    )
    with pytest.raises(hub.HubError, match="sha256"):
        hub.download("test-org/corrupt-GGUF:Q8_0")
    repo_dir = cache / "models--test-org--corrupt-GGUF"
    assert not [p for p in repo_dir.rglob("*") if p.is_file()]
    assert hub.resolve("test-org/corrupt-GGUF:Q8_0") is None

    # cancelled half-way: the partial file is deleted
    fake_hub.repos["test-org/slow-GGUF"] = FakeRepo({"s-Q8_0.gguf": FakeFile(data)}, delay=0.2)
    got: list[int] = []
    with pytest.raises(hub.DownloadCancelled):
        hub.download("test-org/slow-GGUF:Q8_0", lambda u, d, t: got.append(d), lambda: len(got) > 1)
    assert not [p for p in (cache / "models--test-org--slow-GGUF").rglob("*") if p.is_file()]

    # a repository the hub does not know
    with pytest.raises(hub.HubError, match="404"):
        hub.download("test-org/missing-GGUF:Q8_0")
    assert not (cache / "models--test-org--missing-GGUF").exists()


# ------------------------------------------------------------------------ the router


class Sse:
    """``/models/sse`` read in a thread; ``events`` fills as they come."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.events: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.stream("GET", self.url + "/models/sse", timeout=httpx.Timeout(120)) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            self.ready.set()
            for line in r.iter_lines():
                if line.startswith("data: "):
                    self.events.append(json.loads(line[6:]))
                if self.stop.is_set():
                    return

    def __enter__(self) -> Sse:
        self.thread.start()
        assert self.ready.wait(30), "the SSE stream did not open"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        httpx.get(self.url + "/models?reload=1", timeout=60)  # an event wakes the reader
        self.thread.join(30)

    def wait(self, event: str, model: str, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events:
                if e["event"] == event and e["model"] == model:
                    return e
            time.sleep(0.02)
        raise AssertionError(f"no {event} for {model}: {self.events}")

    def of(self, model: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["model"] == model]


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() or p.is_symlink()]


@pytest.fixture
def c() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def router_env(fake_hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {
        "LLAMA_CACHE": str(tmp_path_factory.mktemp("router-cache")),
        "HF_ENDPOINT": fake_hub.url,
        "HF_TOKEN": TOKEN,
        "MODEL_ENDPOINT": "",
    }


@pytest.fixture(scope="module")
def router(
    smollm_path: str, router_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    d = tmp_path_factory.mktemp("router-dir")
    (d / "dir-a.gguf").symlink_to(smollm_path)
    (d / "dir-b.gguf").symlink_to(smollm_path)
    args = ["--models-dir", str(d), "--models-max", "2", "-t", "2", "-c", "1024", "-np", "1"]
    with running_server(*args, env=router_env) as url:
        yield url


def test_download_list_load_and_delete(
    router: str, router_env: dict[str, str], fake_hub: FakeHub, smollm_path: str, c: httpx.Client
) -> None:
    cache = Path(router_env["LLAMA_CACHE"])
    # both slots taken: a download must neither need one nor free one
    for name in ("dir-a", "dir-b"):
        assert c.post(router + "/models/load", json={"model": name}).json() == {"success": True}
        wait_status(router, name, "loaded", client=c)
    assert MODEL not in statuses(router, c)
    n = len(fake_hub.requests)
    with Sse(router) as sse:
        r = c.post(router + "/models", json={"model": MODEL})
        assert r.status_code == 200 and r.json() == {"success": True}
        # listed as downloading while the bytes come, with per-file progress
        deadline = time.monotonic() + 60
        while True:
            entry = listing(router, c).get(MODEL)
            if entry and entry["status"].get("progress"):
                break
            assert time.monotonic() < deadline, "never listed as downloading"
            time.sleep(0.02)
        assert entry["status"]["value"] == "downloading" and entry["source"] == "cache"
        status = statuses(router, c)
        assert (status["dir-a"], status["dir-b"]) == ("loaded", "loaded")
        sse.wait("download_finished", MODEL)
        events = sse.of(MODEL)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "model_status" and events[0]["data"] == {"status": "downloading"}
    assert kinds[-1] == "download_finished" and "data" not in events[-1]
    progress = [e["data"]["progress"] for e in events if e["event"] == "download_progress"]
    assert len(progress) >= 2
    url = f"{fake_hub.url}/test-org/tiny-GGUF/resolve/{COMMIT}/tiny-Q8_0.gguf"
    size = os.path.getsize(smollm_path)
    assert set(progress[-1]) == {url} and progress[-1][url] == {"done": size, "total": size}
    assert all(s.headers.get("authorization") == f"Bearer {TOKEN}" for s in fake_hub.requests[n:])

    # in llama.cpp's layout, only the model's file, and listed under llama.cpp's name
    snap = cache / "models--test-org--tiny-GGUF" / "snapshots" / COMMIT
    assert [p.relative_to(snap).as_posix() for p in _files(snap)] == ["tiny-Q8_0.gguf"]
    assert (cache / "models--test-org--tiny-GGUF" / "refs" / "main").read_text() == COMMIT
    assert not list(cache.rglob("*" + hub.PARTIAL_SUFFIX))
    models = listing(router, c)
    assert models[MODEL]["status"]["value"] == "unloaded"
    assert models[MODEL]["source"] == "cache" and models[MODEL]["can_remove"]
    status = statuses(router, c)
    assert (status["dir-a"], status["dir-b"]) == ("loaded", "loaded")

    # it loads like any other model (the least recently used one makes room)
    with Sse(router) as sse:
        r = c.post(
            router + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
        )
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] and r.json()["model"] == MODEL
        sse.wait("status_change", "dir-a")
        assert [e["data"]["status"] for e in sse.of(MODEL)] == ["loading", "loaded"]
    status = statuses(router, c)
    assert (status[MODEL], status["dir-a"], status["dir-b"]) == ("loaded", "unloaded", "loaded")

    r = c.post(router + "/models", json={"model": MODEL})
    assert r.status_code == 400 and "already exists" in r.json()["error"]["message"]

    # removed: unloaded first, its files gone, no longer listed
    with Sse(router) as sse:
        r = c.delete(router + "/models", params={"model": MODEL})
        assert r.status_code == 200 and r.json() == {"success": True}
        sse.wait("model_remove", MODEL)
        kinds = [(e["event"], e.get("data", {}).get("status")) for e in sse.of(MODEL)]
    assert kinds == [("status_change", "unloaded"), ("model_remove", None)]
    assert not [p for p in _files(cache) if p.suffix == ".gguf"]
    assert not list((cache / "models--test-org--tiny-GGUF" / "blobs").iterdir())
    assert MODEL not in statuses(router, c)

    r = c.delete(router + "/models", params={"model": MODEL})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    r = c.delete(router + "/models", params={"model": "dir-a"})
    assert r.status_code == 400 and "not removable" in r.json()["error"]["message"]


def test_bad_requests_and_failed_downloads(
    router: str, router_env: dict[str, str], fake_hub: FakeHub, c: httpx.Client
) -> None:
    cache = Path(router_env["LLAMA_CACHE"])
    for body in ([MODEL], {"model": ""}, {"model": 3}, {"model": "no-slash"}, {"x": 1}):
        r = c.post(router + "/models", json=body)
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    for name in ("a/b/c", "../../etc:Q8_0", "a/b:Q8 0"):
        r = c.post(router + "/models", json={"model": name})
        assert r.status_code == 400 and "invalid model name" in r.json()["error"]["message"]
    r = c.post(router + "/models", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert c.delete(router + "/models").status_code == 400

    fake_hub.repos["test-org/bad-GGUF"] = FakeRepo({"b-Q8_0.gguf": FakeFile(b"GGUF", bad_sha=True)})
    fake_hub.repos["test-org/stuck-GGUF"] = FakeRepo(
        {"s-Q8_0.gguf": FakeFile(_blob(8 << 20))}, delay=1.0
    )
    missing, bad, stuck = (
        "test-org/missing-GGUF:Q8_0",
        "test-org/bad-GGUF:Q8_0",
        "test-org/stuck-GGUF:Q8_0",
    )
    with Sse(router) as sse:
        for name in (missing, bad, stuck):
            assert c.post(router + "/models", json={"model": name}).json() == {"success": True}
        # a hub that does not know the repository; bytes that fail their sha256
        assert "404" in sse.wait("download_failed", missing)["data"]["error"]
        assert "sha256" in sse.wait("download_failed", bad)["data"]["error"]
        # a download removed while it runs is cancelled
        sse.wait("download_progress", stuck)
        assert c.delete(router + "/models", params={"model": stuck}).json() == {"success": True}
        assert "cancelled" in sse.wait("download_failed", stuck)["data"]["error"]
        sse.wait("model_remove", stuck)
    listed = statuses(router, c)
    assert not {missing, bad, stuck} & set(listed)
    for repo in ("bad", "stuck"):
        assert not [p for p in _files(cache / f"models--test-org--{repo}-GGUF") if p.is_file()]


def test_api_key_guards_downloads_and_removals(router_env: dict[str, str], c: httpx.Client) -> None:
    with running_server("--models-max", "1", "--api-key", "k", env=router_env) as url:
        assert c.get(url + "/models").status_code == 200  # the listing stays public
        for r in (
            c.post(url + "/models", json={"model": MODEL}),
            c.delete(url + "/models", params={"model": MODEL}),
            c.get(url + "/models/sse"),
        ):
            assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"


def test_offline_lists_and_loads_from_the_cache_but_downloads_on_request(
    router_env: dict[str, str], fake_hub: FakeHub, tmp_path: Path, c: httpx.Client
) -> None:
    """--offline keeps the router off the network for everything it does on its own
    (listing, reloading, loading); an explicit ``POST /models`` still fetches from the
    hub, as llama-server's download child does."""
    cache = tmp_path / "offline-cache"
    _snapshot(cache, "test-org/other-GGUF", {"other-Q4_0.gguf": _blob(1 << 10, 5)})
    env = {**router_env, "LLAMA_CACHE": str(cache)}
    missing = "test-org/missing-GGUF:Q8_0"
    n = len(fake_hub.requests)
    args = ["--models-max", "1", "--offline", "-t", "2", "-c", "1024", "-np", "1"]
    with running_server(*args, env=env) as url:
        # found where llama-server left it, without asking the hub
        assert statuses(url, c)["test-org/other-GGUF:Q4_0"] == "unloaded"
        assert len(fake_hub.requests) == n, "an offline router asked the hub to list"
        with Sse(url) as sse:
            for name in (MODEL, missing):
                assert c.post(url + "/models", json={"model": name}).json() == {"success": True}
            sse.wait("download_finished", MODEL)
            assert "404" in sse.wait("download_failed", missing)["data"]["error"]
        fetched = [p for p in fake_hub.paths()[n:] if p.startswith("/cdn/")]
        assert fetched == [f"/cdn/test-org/tiny-GGUF/{COMMIT}/tiny-Q8_0.gguf"]
        snap = cache / "models--test-org--tiny-GGUF" / "snapshots" / COMMIT
        assert (snap / "tiny-Q8_0.gguf").is_file()

        # loading the downloaded model and listing again: still nothing asked of the hub
        n = len(fake_hub.requests)
        body = {"model": MODEL, "prompt": "Hi", "n_predict": 2}
        r = c.post(url + "/completion", json=body)
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 2, r.text
        assert c.get(url + "/models?reload=1").status_code == 200
        status = statuses(url, c)
        assert status[MODEL] == "loaded" and missing not in status
        r = c.post(url + "/models", json={"model": MODEL})
        assert r.status_code == 400 and "already exists" in r.text
        assert len(fake_hub.requests) == n, "an offline router asked the hub on its own"


def test_fake_hub_script_answers_what_llama_cpp_asks(smollm_path: str, tmp_path: Path) -> None:
    """tests/helpers/fake_hub.py run as ci/peer_tests.sh runs it, asked what llama.cpp's
    downloader asks (common/hf-cache.cpp, common/download.cpp): refs, the recursive tree,
    HEAD of /resolve/ (redirect followed) for size, ETag and ranges, then a ranged GET."""
    repo, name = "ggml-org/test-model-router-download", "test-model-router-download-F16.gguf"
    data = Path(smollm_path).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    port_file = tmp_path / "port"
    script = Path(__file__).parents[1] / "helpers" / "fake_hub.py"
    serve = ["--serve", f"{repo}={name}={smollm_path}"]
    cmd = [sys.executable, str(script), "--port", "0", "--port-file", str(port_file), *serve]
    log = tmp_path / "fake-hub.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the fake hub never said its port"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        # the commit the CLI serves a repository at: the sha1 of its name
        commit = commit_for(repo)
        assert commit == hashlib.sha1(repo.encode()).hexdigest()
        with httpx.Client(timeout=120) as c:
            refs = c.get(f"{url}/api/models/{repo}/refs").json()
            assert refs["branches"][0]["name"] == "main"
            assert refs["branches"][0]["targetCommit"] == commit
            tree = c.get(f"{url}/api/models/{repo}/tree/{commit}?recursive=true").json()
            files = [item for item in tree if item["type"] == "file"]
            assert [(f["path"], f["size"], f["lfs"]["oid"]) for f in files] == [
                (name, len(data), sha)
            ]
            resolve = f"{url}/{repo}/resolve/{commit}/{name}"
            r = c.head(resolve)
            assert r.status_code == 302 and r.headers["x-linked-etag"] == f'"{sha}"'
            assert r.headers["x-repo-commit"] == commit
            r = c.head(resolve, follow_redirects=True)
            assert r.status_code == 200 and r.content == b""
            assert int(r.headers["content-length"]) == len(data)
            assert (r.headers["etag"], r.headers["accept-ranges"]) == (f'"{sha}"', "bytes")
            r = c.get(resolve, headers={"Range": "bytes=100-"}, follow_redirects=True)
            assert r.status_code == 206 and r.content == data[100:]
            r = c.get(f"{url}/api/models/ggml-org/absent/refs")
            assert r.status_code == 404 and r.json() == {"error": "Repository not found"}
            assert c.head(f"{url}/{repo}/resolve/{commit}/nope.gguf").status_code == 404
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    # each request logged, for the peer harness's fake-hub.log
    assert f"HEAD /{repo}/resolve/{commit}/{name}" in log.read_text()
