"""llama-server's adapter options act on what the model says: --lora-scaled and
--lora-init-without-apply set the scale a request gets by default (/lora-adapters shows it,
and the greedy text follows it); --control-vector-scaled and --control-vector-layer-range
change how much of a control vector is added, and where."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pyllama import _core

from helpers.control_vector import write_control_vector
from helpers.lora_adapter import write_lora
from helpers.peer import running_peer
from helpers.servers import running_server

BASE = ("-t", "2", "-c", "512", "-np", "1", "--no-warmup")
BODY = {"prompt": "My favourite fruit is", "n_predict": 8, "temperature": 0}


def _greedy(url: str, **extra: object) -> str:
    r = httpx.post(f"{url}/completion", json={**BODY, **extra}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["content"]


@pytest.fixture(scope="module")
def adapter(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lora") / "a.gguf"
    return write_lora(smollm_path, out, rank=4, seed=0, a_type="q4_1")


@pytest.fixture(scope="module")
def baseline(smollm_path: str) -> Iterator[str]:
    with running_server("-m", smollm_path, *BASE) as url:
        yield _greedy(url)


@pytest.mark.flag_effect("--lora-scaled")
def test_lora_scaled_sets_the_default_scale(smollm_path: str, adapter: Path) -> None:
    with running_server("-m", smollm_path, *BASE, "--lora-scaled", f"{adapter}:0.5") as url:
        listed = httpx.get(f"{url}/lora-adapters", timeout=30).json()
        assert listed == [{"id": 0, "path": str(adapter), "scale": 0.5}]
        by_default = _greedy(url)
        assert by_default == _greedy(url, lora=[{"id": 0, "scale": 0.5}])
        assert by_default != _greedy(url, lora=[{"id": 0, "scale": 0.0}])
        assert by_default != _greedy(url, lora=[{"id": 0, "scale": 1.0}])


@pytest.mark.flag_effect("--lora-init-without-apply")
def test_lora_init_without_apply_loads_the_adapter_at_scale_zero(
    smollm_path: str, adapter: Path, baseline: str
) -> None:
    args = ("--lora", str(adapter), "--lora-init-without-apply")
    with running_server("-m", smollm_path, *BASE, *args) as url:
        listed = httpx.get(f"{url}/lora-adapters", timeout=30).json()
        assert listed == [{"id": 0, "path": str(adapter), "scale": 0.0}]
        assert _greedy(url) == baseline
        assert _greedy(url, lora=[{"id": 0, "scale": 1.0}]) != baseline


@pytest.fixture(scope="module")
def control_vector(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = _core.Model(smollm_path, vocab_only=True)
    n_embd = int(model.meta("llama.embedding_length"))
    n_layer = int(model.meta("llama.block_count"))
    out = tmp_path_factory.mktemp("cv") / "cv.gguf"
    return write_control_vector(out, n_embd, n_layer, magnitude=1.0)


@pytest.fixture(scope="module")
def steered(smollm_path: str, control_vector: Path) -> Iterator[str]:
    """The greedy text with the whole control vector at scale 1."""
    with running_server("-m", smollm_path, *BASE, "--control-vector", str(control_vector)) as url:
        yield _greedy(url)


@pytest.mark.flag_effect("--control-vector-scaled")
def test_control_vector_scaled_adds_the_vector_at_its_scale(
    smollm_path: str, control_vector: Path, baseline: str, steered: str
) -> None:
    assert steered != baseline
    scaled = ("--control-vector-scaled", f"{control_vector}:3")
    with running_server("-m", smollm_path, *BASE, *scaled) as url:
        tripled = _greedy(url)
    assert tripled not in (baseline, steered)


@pytest.mark.flag_effect("--control-vector-layer-range")
def test_control_vector_layer_range_limits_the_layers_it_steers(
    smollm_path: str, control_vector: Path, baseline: str, steered: str
) -> None:
    cv = ("--control-vector", str(control_vector))
    with running_server(
        "-m", smollm_path, *BASE, *cv, "--control-vector-layer-range", "1", "4"
    ) as url:
        first_layers = _greedy(url)
    assert first_layers not in (baseline, steered)
    beyond = ("--control-vector-layer-range", "100", "200")  # no layer of the model's 30
    with running_server("-m", smollm_path, *BASE, *cv, *beyond) as url:
        assert _greedy(url) == baseline


@pytest.mark.flag_effect("--lora-scaled", "--control-vector-scaled", "--control-vector-layer-range")
def test_scaled_adapters_say_what_llama_server_says(
    smollm_path: str, adapter: Path, control_vector: Path, baseline: str
) -> None:
    args = ("-m", smollm_path, *BASE, "--lora-scaled", f"{adapter}:0.5")
    args += ("--control-vector-scaled", f"{control_vector}:2", "--control-vector-layer-range")
    args += ("3", "20")
    with running_peer(*args) as url:
        theirs = _greedy(url)
    with running_server(*args) as url:
        ours = _greedy(url)
    assert ours == theirs != baseline
