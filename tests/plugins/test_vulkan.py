"""The Vulkan plugin (pyllama-engine-vulkan) on lavapipe, Mesa's Vulkan device made of CPU
cores: the GPU code path (device listing, offload, partial offload, --device) on a machine
with no GPU. ggml-vulkan lists CPU-type Vulkan devices only when GGML_VK_VISIBLE_DEVICES
names them, so every server here gets GGML_VK_VISIBLE_DEVICES=0.

Needs the plugin: `apt-get install libvulkan-dev glslc spirv-headers mesa-vulkan-drivers`
then `pip install ./plugins/vulkan`. Without it these tests are skipped and say so; with
PYLLAMA_REQUIRE_PLUGINS=vulkan (as .ci/run sets) its absence is an error instead."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import httpx

from helpers.servers import free_port, running_server
from helpers.vulkan import requires_vulkan

LAVAPIPE = {"GGML_VK_VISIBLE_DEVICES": "0"}
SERVER = [sys.executable, "-m", "pyllama.server"]
pytestmark = requires_vulkan

PROMPT = {"prompt": "The capital of France is", "n_predict": 8, "temperature": 0}


def _server(*args: str):
    return running_server("-t", "2", "-np", "1", "-c", "512", *args, env=LAVAPIPE, timeout=300)


def _answer(url: str) -> str:
    r = httpx.post(f"{url}/completion", json=PROMPT, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["content"]


def _offload(url: str) -> tuple[int, int]:
    props = httpx.get(f"{url}/props", timeout=30).json()
    return props["offloaded_layers"], props["offloadable_layers"]


def test_list_devices_shows_lavapipe():
    r = subprocess.run(
        [*SERVER, "--list-devices"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, **LAVAPIPE},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "Available devices:"
    assert r.stdout.splitlines()[1].startswith("  Vulkan0: llvmpipe")


def test_every_layer_offloaded_says_so_in_the_log_and_props(smollm_path, tmp_path):
    log = tmp_path / "server.log"
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*SERVER, "-m", smollm_path, "-ngl", "99", "-t", "2", "-c", "512", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tempfile.gettempdir(),
            env={**os.environ, **LAVAPIPE},
        )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            if proc.poll() is not None or "layers to GPU" in log.read_text():
                break
            time.sleep(0.5)
        assert "pyllama-server: offloaded 31/31 layers to GPU (Vulkan0)" in log.read_text()
        assert _offload(url) == (31, 31)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_offloaded_greedy_output_starts_as_the_cpus(smollm_path):
    # ggml-vulkan accumulates in f16 where the CPU uses f32: on SmolLM2 the greedy
    # texts agree for the first 4 tokens, then drift apart (docs/distribution.md)
    with _server("-m", smollm_path, "-ngl", "0") as url:
        assert _offload(url) == (0, 31)
        cpu = _answer(url)
    with _server("-m", smollm_path, "-ngl", "99") as url:
        gpu = _answer(url)
    assert cpu.startswith(" Paris.\n\nThe")
    assert gpu.startswith(" Paris.\n\nThe")


def test_a_partial_offload_splits_the_layers(smollm_path):
    with _server("-m", smollm_path, "-ngl", "10", "-dev", "Vulkan0") as url:
        assert _offload(url) == (10, 31)
        assert _answer(url).startswith(" Paris.")


def test_device_none_keeps_everything_on_the_cpu(smollm_path):
    with _server("-m", smollm_path, "-ngl", "99", "-dev", "none") as url:
        assert _offload(url) == (0, 31)
