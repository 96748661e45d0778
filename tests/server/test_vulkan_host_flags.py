"""--no-host and --no-op-offload act where a GPU backend is loaded: lavapipe (Mesa's Vulkan
device made of CPU cores) as the one Vulkan device, the layers kept on the CPU (-ngl 0).
The peer llama-server is built for the CPU alone (ci/build_peer.sh), so each option is
compared with pyllama-server without it, in the -v log of the one model load (--fit off):

- --no-host: the weights the CPU computes with go to the first buffer type of llama.cpp's
  CPU list that takes them: the GPU's host (pinned) buffer type, Vulkan_Host, unless
  --no-host drops it; then the CPU's extra buffer types (CPU_REPACK, which a Q4_1 model's
  tensors cannot use: llama.cpp says so) come first, and the plain CPU buffer takes them.
  With a mapped file (the default load mode) the loader replaces the host buffer type by
  the CPU's anyway, so the load mode here is none.
- --no-op-offload: the scheduler runs an op whose weight sits in a host buffer on the GPU
  when its batch is large enough (lavapipe: 32 tokens), so the prompt graph reserved for a
  512-token batch splits between the CPU and Vulkan0 and Vulkan0 gets a compute buffer;
  without op offload the graph is one split on the CPU.

Needs the Vulkan plugin (tests/helpers/vulkan.py): skipped
and saying so without it, an error with PYLLAMA_REQUIRE_PLUGINS=vulkan."""

from __future__ import annotations

import re
import tempfile

import pytest

from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy
from helpers.vulkan import requires_vulkan

ONE_GPU = {"GGML_VK_VISIBLE_DEVICES": "0"}
pytestmark = requires_vulkan

MODEL_BUFFER = re.compile(r"load_tensors: +(\S+) model buffer size")
COMPUTE_BUFFER = re.compile(r"sched_reserve: +(\S+) compute buffer size")
SPLITS = re.compile(r"sched_reserve: graph.*?splits = (\d+)")
REPACK = "preferred buffer type CPU_REPACK, using CPU instead"


def cpu_layers_log(model: str, *args: str) -> str:
    """The -v log, up to /health, of a server keeping every layer on the CPU."""
    with tempfile.TemporaryFile() as log:
        cmd = [*PYLLAMA_SERVER, "-m", model, "-c", "512", "-np", "1", "-t", "2", "-v"]
        cmd += ["-ngl", "0", "--fit", "off", "--no-warmup", *args]
        proc, url = start_process(cmd, stdout=log, env=ONE_GPU)
        try:
            wait_healthy(url, proc, timeout=300)
        finally:
            stop_process(proc)
        log.seek(0)
        return log.read().decode(errors="replace")


@pytest.mark.flag_effect("--no-host")
def test_no_host_keeps_the_cpu_weights_out_of_the_gpu_host_buffer(smollm_path: str) -> None:
    host = cpu_layers_log(smollm_path, "--load-mode", "none")
    no_host = cpu_layers_log(smollm_path, "--load-mode", "none", "--no-host")
    assert MODEL_BUFFER.findall(host) == ["Vulkan_Host"]
    assert REPACK not in host  # the host buffer type comes first and takes every tensor
    assert MODEL_BUFFER.findall(no_host) == ["CPU"]
    assert REPACK in no_host  # the extra buffer types come first now


@pytest.mark.flag_effect("--no-op-offload")
def test_no_op_offload_keeps_the_prompt_graph_on_the_cpu(smollm_path: str) -> None:
    offload = cpu_layers_log(smollm_path)
    no_offload = cpu_layers_log(smollm_path, "--no-op-offload")
    assert "Vulkan0" in COMPUTE_BUFFER.findall(offload)
    assert int(SPLITS.findall(offload)[-1]) > 1
    assert "Vulkan0" not in COMPUTE_BUFFER.findall(no_offload)
    assert SPLITS.findall(no_offload) == ["1"]
