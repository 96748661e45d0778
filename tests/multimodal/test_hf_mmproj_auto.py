"""``-hf`` with a repository that holds a projector loads it beside the model, as
llama-server's ``--mmproj-auto`` (on by default); ``--no-mmproj-auto`` leaves it out."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from helpers.servers import running_server

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def hub_cache(tiny_vlm: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hub cache holding test-org/tiny-GGUF: the model at Q8_0 and its projector."""
    root = tmp_path_factory.mktemp("hub-cache")
    repo = root / "models--test-org--tiny-GGUF"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / "tiny-Q8_0.gguf").symlink_to(tiny_vlm["model"])
    (snap / "mmproj-tiny-F16.gguf").symlink_to(tiny_vlm["mmproj_omni"])
    return root


def _modalities(url: str) -> dict:
    return httpx.get(url + "/props").json()["modalities"]


@pytest.mark.flag_effect("--no-mmproj-auto")
@pytest.mark.parametrize(("flags", "vision"), [([], True), (["--no-mmproj-auto"], False)])
def test_hf_model_comes_with_its_projector(hub_cache: Path, flags: list[str], vision: bool):
    args = ["-hf", "test-org/tiny-GGUF:Q8_0", "--offline", "-c", "1024", "-t", "2", *flags]
    with running_server(*args, env={"LLAMA_CACHE": str(hub_cache)}) as url:
        modalities = _modalities(url)
        assert (modalities["vision"], modalities["audio"]) == (vision, vision)
        props = httpx.get(url + "/props").json()
        assert props["model_path"].endswith("tiny-Q8_0.gguf")
