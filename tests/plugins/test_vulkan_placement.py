"""Where the offload flags put the work, on two Vulkan devices: GGML_VK_VISIBLE_DEVICES=0,0
lists lavapipe (Mesa's Vulkan device made of CPU cores) twice, as Vulkan0 and Vulkan1, so
--device, --split-mode, --tensor-split, --main-gpu, --fit, --fit-target, --fit-ctx, the draft
model's -devd/-ngld and the projector's --mmproj-device/--no-mmproj-offload each change what
the -v log says went where (llama.cpp's "layer N assigned to device X", "CLIP using X
backend") or what /props reports (offloaded_layers, n_ctx).

Needs the Vulkan plugin (tests/helpers/vulkan.py): skipped and saying so
without it, an error with PYLLAMA_REQUIRE_PLUGINS=vulkan."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import httpx
import pytest

from fixtures.tiny_vlm import write_text_model, write_vision_projector
from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy
from helpers.vulkan import requires_vulkan

TWO_GPUS = {"GGML_VK_VISIBLE_DEVICES": "0,0"}
ONE_GPU = {"GGML_VK_VISIBLE_DEVICES": "0"}
pytestmark = requires_vulkan

LAYER = re.compile(r"load_tensors: layer +(\d+) assigned to device (\w+),")


def _start(env: dict[str, str], *args: str) -> tuple[dict, str]:
    """(/props, the -v log up to /health) of a server started with ``args``; stopped again."""
    with tempfile.TemporaryFile() as log:
        cmd = [*PYLLAMA_SERVER, "-t", "2", "-np", "1", "-v", *args]
        proc, url = start_process(cmd, stdout=log, env=env)
        try:
            wait_healthy(url, proc, timeout=300)
            props = httpx.get(f"{url}/props", timeout=30).json()
        finally:
            stop_process(proc)
            log.seek(0)
            text = log.read().decode(errors="replace")
    return props, text


def _layers(log: str) -> list[dict[int, str]]:
    """For each model load, in order: layer -> the device it was assigned to (the server
    loads a model once more for serving after --fit's trial load: the last is the one used)."""
    loads: list[dict[int, str]] = []
    for m in LAYER.finditer(log):
        layer, dev = int(m.group(1)), m.group(2)
        if layer == 0:
            loads.append({})
        loads[-1][layer] = dev
    return loads


def _count(load: dict[int, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for dev in load.values():
        out[dev] = out.get(dev, 0) + 1
    return out


@pytest.mark.flag_effect("--tensor-split")
def test_tensor_split_shares_the_layers_out_in_its_proportions(smollm_path):
    _, log31 = _start(TWO_GPUS, "-m", smollm_path, "-c", "512", "-ngl", "99", "-ts", "3,1")
    _, log13 = _start(TWO_GPUS, "-m", smollm_path, "-c", "512", "-ngl", "99", "-ts", "1,3")
    a, b = _layers(log31)[-1], _layers(log13)[-1]
    assert _count(a) == {"Vulkan0": 24, "Vulkan1": 7}
    assert _count(b)["Vulkan0"] < _count(b)["Vulkan1"]


@pytest.mark.flag_effect("--split-mode", "--main-gpu", "--device")
def test_split_mode_main_gpu_and_device_choose_the_devices(smollm_path):
    base = ("-m", smollm_path, "-c", "512", "-ngl", "99")
    _, spread = _start(TWO_GPUS, *base)  # -sm layer (the default) across both
    _, main1 = _start(TWO_GPUS, *base, "-sm", "none", "-mg", "1")
    _, main0 = _start(TWO_GPUS, *base, "-sm", "none")
    _, dev1 = _start(TWO_GPUS, *base, "-dev", "Vulkan1")
    assert set(_count(_layers(spread)[-1])) == {"Vulkan0", "Vulkan1"}
    assert _count(_layers(main1)[-1]) == {"Vulkan1": 31}
    assert _count(_layers(main0)[-1]) == {"Vulkan0": 31}
    assert _count(_layers(dev1)[-1]) == {"Vulkan1": 31}


@pytest.mark.flag_effect("--fit", "--fit-target", "--fit-ctx")
def test_fit_shrinks_the_context_then_the_layers_to_leave_the_target_free(smollm_path):
    """No -c, no -ngl: llama-server fits the model's 8192-token context and every layer in
    lavapipe's 2048 MiB unless --fit-target asks to keep nearly all of it free; then the
    context shrinks, down to --fit-ctx (4096 by default), then layers go back to the CPU."""
    m = ("-m", smollm_path)
    fitted, _ = _start(ONE_GPU, *m)
    tight, _ = _start(ONE_GPU, *m, "-fitt", "1900")
    small_ctx, _ = _start(ONE_GPU, *m, "-fitt", "1900", "-fitc", "1024")
    unfitted, _ = _start(ONE_GPU, *m, "-fitt", "1900", "-fit", "off")

    def placed(props: dict) -> tuple[int, int]:
        return props["default_generation_settings"]["n_ctx"], props["offloaded_layers"]

    assert placed(fitted) == (8192, 31)
    n_ctx, layers = placed(tight)
    assert n_ctx == 4096 and 0 < layers < 31
    n_ctx, layers = placed(small_ctx)
    assert 1024 <= n_ctx < 4096 and layers == 31
    assert placed(unfitted) == (8192, 31)


@pytest.mark.flag_effect("--device-draft", "--n-gpu-layers-draft")
def test_the_draft_model_goes_where_devd_and_ngld_say(smollm_path):
    base = ("-m", smollm_path, "-c", "512", "-dev", "Vulkan0", "-md", smollm_path)
    base += ("--spec-type", "draft-simple", "-devd", "Vulkan1")
    _, on1 = _start(TWO_GPUS, *base, "-ngld", "99")
    _, on_cpu = _start(TWO_GPUS, *base, "-ngld", "0")
    # the target model (twice: its loads for fitting and serving), then the draft
    *target, draft = _layers(on1)
    assert all(_count(load) == {"Vulkan0": 31} for load in target)
    assert _count(draft) == {"Vulkan1": 31}
    assert _count(_layers(on_cpu)[-1]) == {"CPU": 31}


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory, smollm_path: str) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("tiny_vlm")
    return {
        "model": write_text_model(out / "model.gguf", tokenizer_source=smollm_path),
        "mmproj": write_vision_projector(out / "mmproj.gguf"),
    }


@pytest.mark.flag_effect("--mmproj-device", "--no-mmproj-offload")
def test_the_projector_goes_where_mmproj_device_says(tiny_vlm):
    base = ("-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj"]), "-c", "512")

    def clip(*args: str) -> list[str]:
        return re.findall(r"CLIP using (\w+) backend", _start(TWO_GPUS, *base, *args)[1])

    assert clip() == ["Vulkan0"]
    assert clip("--mmproj-device", "Vulkan1") == ["Vulkan1"]
    assert clip("--no-mmproj-offload") == ["CPU"]


@pytest.mark.flag_effect("--no-kv-offload")
def test_no_kv_offload_keeps_the_kv_cache_on_the_host(smollm_path):
    kv = re.compile(r"llama_kv_cache: +(\w+) KV buffer size")
    placed = {}
    for flag in ((), ("--no-kv-offload",)):
        _, log = _start(ONE_GPU, "-m", smollm_path, "-c", "512", "-ngl", "99", *flag)
        placed[flag] = kv.findall(log)[-1]  # the serving context's (after --fit's trial)
    assert placed == {(): "Vulkan0", ("--no-kv-offload",): "CPU"}
