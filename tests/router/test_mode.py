"""When ``pyllama-server`` is a router (pyllama/server/router/mode.py): with no model flag,
a router over llama.cpp's model cache when it holds a model, as llama-server, else the
demo model; ``-hf`` of a repository holding a ``preset.ini``, a router over its presets,
as llama-server. Real server processes; tests/helpers/fake_hub.py stands in for the hub."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.fake_hub import FakeFile, FakeHub, FakeRepo, commit_for
from helpers.router import listing
from helpers.servers import running_server


def _props(url: str) -> dict:
    r = httpx.get(url + "/props", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _seed(cache: Path, repo: str, name: str, model: str) -> None:
    """``model`` as ``name`` of ``repo`` in the hub cache's layout (a copy, no blob)."""
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    commit = commit_for(repo)
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit)
    (repo_dir / "snapshots" / commit).mkdir(parents=True)
    shutil.copyfile(model, repo_dir / "snapshots" / commit / name)


def _env(cache: Path, hub: FakeHub | None = None) -> dict[str, str]:
    env = {"LLAMA_CACHE": str(cache), "HF_HUB_CACHE": "", "MODEL_ENDPOINT": ""}
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    return env


def test_no_model_and_an_empty_cache_serves_the_demo_model(tmp_path: Path) -> None:
    with running_server("-c", "512", env=_env(tmp_path / "cache")) as url:
        props = _props(url)
        assert props.get("role") != "router"
        assert "SmolLM2" in props["model_path"]


def test_no_model_and_a_cached_model_is_a_router_as_llama_server(
    tmp_path: Path, smollm_path: str
) -> None:
    cache = tmp_path / "cache"
    _seed(cache, "test-org/tiny-GGUF", "tiny-Q4_1.gguf", smollm_path)
    with running_server(env=_env(cache)) as url:
        assert _props(url)["role"] == "router"
        assert "test-org/tiny-GGUF:Q4_1" in listing(url)


@pytest.fixture
def preset_hub(tmp_path: Path, smollm_path: str) -> Iterator[FakeHub]:
    hub = FakeHub()
    ini = f"[tiny-preset]\nmodel = {smollm_path}\nc = 512\n"
    hub.repos["test-org/presets"] = FakeRepo(
        {"preset.ini": FakeFile(ini.encode(), lfs=False), "README.md": FakeFile(b"#\n", lfs=False)},
        commit=commit_for("test-org/presets"),
    )
    yield hub
    hub.close()


def test_hf_of_a_preset_repository_is_a_router_over_its_presets(
    tmp_path: Path, preset_hub: FakeHub
) -> None:
    cache = tmp_path / "cache"
    with running_server("-hf", "test-org/presets", env=_env(cache, preset_hub)) as url:
        assert _props(url)["role"] == "router"
        assert "tiny-preset" in listing(url)
    # fetched into the cache as llama-server keeps it, so --offline starts the same router
    repo_dir = cache / "models--test-org--presets"
    assert (repo_dir / "snapshots" / commit_for("test-org/presets") / "preset.ini").is_file()
    with running_server("-hf", "test-org/presets", "--offline", env=_env(cache)) as url:
        assert "tiny-preset" in listing(url)
