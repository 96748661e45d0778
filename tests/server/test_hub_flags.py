"""llama-server's hub options act: ``-hf`` downloads the repository's model from the hub
(a stand-in, tests/helpers/fake_hub.py, at HF_ENDPOINT) into the cache, ``-hff`` picks
another of its files, ``-hft`` sends a token with every request, ``--offline`` uses the cache
alone, ``-hfd`` fetches the draft model, and each model preset asks the hub for its own
repository (and file)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fixtures.tiny_vlm import write_text_model
from helpers.fake_hub import FakeFile, FakeHub, FakeRepo
from helpers.servers import running_server

REPO = "test-org/tiny-GGUF"
TOKEN = "hf_t0k"
BASE = ("-t", "2", "-c", "512", "-np", "1", "--no-warmup")


@pytest.fixture(scope="module")
def fake_hub(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeHub]:
    d = tmp_path_factory.mktemp("tiny")
    # two models with other bytes: a file whose blob is cached already is not downloaded
    f16, q8 = (
        write_text_model(d / f"{name}.gguf", tokenizer_source=smollm_path, seed=seed)
        for seed, name in enumerate(("f16", "q8"))
    )
    h = FakeHub()
    h.repos[REPO] = FakeRepo(
        {
            "tiny-F16.gguf": FakeFile(f16),
            "tiny-Q8_0.gguf": FakeFile(q8),
            # a second file of the F16 tag in a folder, as ggml-org/models holds several
            "other/ggml-model-f16.gguf": FakeFile(q8),
        }
    )
    yield h
    h.close()


def _env(hub: FakeHub, cache: Path) -> dict[str, str]:
    # HF_TOKEN empty: no token unless -hft gives one
    return {"LLAMA_CACHE": str(cache), "HF_ENDPOINT": hub.url, "HF_TOKEN": "", "MODEL_ENDPOINT": ""}


def _model_path(url: str) -> str:
    return httpx.get(f"{url}/props", timeout=30).json()["model_path"]


@pytest.mark.flag_effect("--hf-repo", "--hf-file", "--hf-token")
def test_hf_repo_file_and_token(fake_hub: FakeHub, tmp_path: Path) -> None:
    env = _env(fake_hub, tmp_path / "cache")
    n = len(fake_hub.requests)
    with running_server("-hf", REPO, *BASE, env=env) as url:  # the default tag: Q8_0
        assert Path(_model_path(url)).name == "tiny-Q8_0.gguf"
    untokened = fake_hub.requests[n:]
    assert any(s.path.endswith("/tiny-Q8_0.gguf") for s in untokened)
    assert all("authorization" not in s.headers for s in untokened)
    n = len(fake_hub.requests)
    args = ("-hf", REPO, "-hff", "tiny-F16.gguf", "-hft", TOKEN)
    with running_server(*args, *BASE, env=env) as url:
        assert Path(_model_path(url)).name == "tiny-F16.gguf"
    tokened = fake_hub.requests[n:]
    assert any(s.path.endswith("/tiny-F16.gguf") for s in tokened)
    assert all(s.headers.get("authorization") == f"Bearer {TOKEN}" for s in tokened)


@pytest.mark.flag_effect("--offline")
def test_offline_uses_the_cache_alone(fake_hub: FakeHub, tmp_path: Path) -> None:
    env = _env(fake_hub, tmp_path / "cache")
    n = len(fake_hub.requests)
    offline = running_server("-hf", REPO, "--offline", *BASE, env=env)
    with pytest.raises(RuntimeError, match="not in the cache"), offline:
        pass
    assert fake_hub.requests[n:] == []
    with running_server("-hf", REPO, *BASE, env=env) as url:
        online = _model_path(url)
    n = len(fake_hub.requests)
    with running_server("-hf", REPO, "--offline", *BASE, env=env) as url:
        assert _model_path(url) == online
    assert fake_hub.requests[n:] == []


@pytest.mark.flag_effect("--hf-repo-draft")
def test_hf_repo_draft_fetches_the_draft(
    fake_hub: FakeHub, smollm_path: str, tmp_path: Path
) -> None:
    env = _env(fake_hub, tmp_path / "cache")
    args = ("-m", smollm_path, "--spec-type", "draft-simple", *BASE)
    n = len(fake_hub.requests)
    with running_server(*args, "-hfd", f"{REPO}:F16", env=env):
        pass
    assert any(s.path.endswith("/tiny-F16.gguf") for s in fake_hub.requests[n:])
    cached = list((tmp_path / "cache").rglob("tiny-F16.gguf"))
    assert len(cached) == 1


def _preset(flag: str, repo: str, mark: pytest.MarkDecorator) -> object:
    return pytest.param(flag, repo, marks=mark, id=flag)


PRESETS = [
    _preset(
        "--embd-gemma-default",
        "ggml-org/embeddinggemma-300M-qat-q4_0-GGUF",
        pytest.mark.flag_effect("--embd-gemma-default"),
    ),
    _preset(
        "--fim-qwen-1.5b-default",
        "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF",
        pytest.mark.flag_effect("--fim-qwen-1.5b-default"),
    ),
    _preset(
        "--fim-qwen-3b-default",
        "ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF",
        pytest.mark.flag_effect("--fim-qwen-3b-default"),
    ),
    _preset(
        "--fim-qwen-7b-default",
        "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF",
        pytest.mark.flag_effect("--fim-qwen-7b-default"),
    ),
    _preset(
        "--fim-qwen-7b-spec",
        "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF",
        pytest.mark.flag_effect("--fim-qwen-7b-spec"),
    ),
    _preset(
        "--fim-qwen-14b-spec",
        "ggml-org/Qwen2.5-Coder-14B-Q8_0-GGUF",
        pytest.mark.flag_effect("--fim-qwen-14b-spec"),
    ),
    _preset(
        "--fim-qwen-30b-default",
        "ggml-org/Qwen3-Coder-30B-A3B-Instruct-Q8_0-GGUF",
        pytest.mark.flag_effect("--fim-qwen-30b-default"),
    ),
    _preset(
        "--gpt-oss-20b-default",
        "ggml-org/gpt-oss-20b-GGUF",
        pytest.mark.flag_effect("--gpt-oss-20b-default"),
    ),
    _preset(
        "--gpt-oss-120b-default",
        "ggml-org/gpt-oss-120b-GGUF",
        pytest.mark.flag_effect("--gpt-oss-120b-default"),
    ),
    _preset(
        "--vision-gemma-4b-default",
        "ggml-org/gemma-3-4b-it-qat-GGUF",
        pytest.mark.flag_effect("--vision-gemma-4b-default"),
    ),
    _preset(
        "--vision-gemma-12b-default",
        "ggml-org/gemma-3-12b-it-qat-GGUF",
        pytest.mark.flag_effect("--vision-gemma-12b-default"),
    ),
]


@pytest.mark.parametrize(
    ("preset", "repo"),
    PRESETS,
)
def test_a_preset_asks_the_hub_for_its_model(
    fake_hub: FakeHub, tmp_path: Path, preset: str, repo: str
) -> None:
    """Not on the stand-in hub: the server stops, naming the repository it asked for."""
    n = len(fake_hub.requests)
    server = running_server(preset, *BASE, env=_env(fake_hub, tmp_path / "cache"))
    with pytest.raises(RuntimeError, match=re.escape(repo)), server:
        pass
    assert any(f"/{repo}/" in s.path for s in fake_hub.requests[n:])


@pytest.mark.flag_effect("--embd-gemma-default")
def test_the_embedding_preset_serves_its_model_with_its_flags(
    fake_hub: FakeHub, smollm_path: str, tmp_path: Path
) -> None:
    """Its repository served (by a tiny model): 32 slots of 2048 tokens, embeddings on."""
    repo, name = "ggml-org/embeddinggemma-300M-qat-q4_0-GGUF", "embeddinggemma-300M-qat-Q4_0.gguf"
    tiny = write_text_model(tmp_path / "e.gguf", tokenizer_source=smollm_path, seed=2)
    fake_hub.repos[repo] = FakeRepo({name: FakeFile(tiny)})
    env = _env(fake_hub, tmp_path / "cache")
    try:
        with running_server("--embd-gemma-default", "-t", "2", "--no-warmup", env=env) as url:
            props = httpx.get(f"{url}/props", timeout=30).json()
            r = httpx.post(f"{url}/embedding", json={"content": "hi"}, timeout=60)
    finally:
        del fake_hub.repos[repo]
    assert Path(props["model_path"]).name == name
    assert props["total_slots"] == 32
    assert r.status_code == 200, r.text


def test_hf_file_is_that_very_file_among_others_of_its_tag(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    env = _env(fake_hub, tmp_path / "cache")
    args = ("-hf", REPO, "-hff", "other/ggml-model-f16.gguf")
    with running_server(*args, *BASE, env=env) as url:
        assert _model_path(url).endswith("other/ggml-model-f16.gguf")
    with running_server(*args, "--offline", *BASE, env=env) as url:  # then from the cache
        assert _model_path(url).endswith("other/ggml-model-f16.gguf")
