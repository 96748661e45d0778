#!/usr/bin/env bash
# The plugin jobs of the release workflow (.github/workflows/release.yml): build a GPU
# backend's plugin wheel (ci/build_backend.sh), or run the package tests on it installed
# beside the core wheel it belongs to (ci/test_wheel.sh).
#
#   ci/release_plugin.sh build cuda|vulkan OUT
#   ci/release_plugin.sh test  cuda|vulkan CORE_WHEEL PLUGIN_WHEEL
#
# For Debian 12 (the workflow's container and this project's machines): what a step lacks
# comes from apt-get and pip, as in .ci/run. Vulkan is tested on lavapipe (Mesa's Vulkan
# device made of CPU cores) and its absence is an error; the hosted runners have no NVIDIA
# GPU, so the CUDA test proves the wheels install from binaries and the suite passes with
# the plugin present, not CUDA itself (that is ci/gpu_check.sh, on a GPU machine).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: ci/release_plugin.sh build BACKEND OUT | test BACKEND CORE_WHEEL PLUGIN_WHEEL"
step=${1:?$usage}
backend=${2:?$usage}

apt_need() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [[ ${#missing[@]} -gt 0 ]]; then
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

case "$step:$backend" in
  build:cuda | build:vulkan)
    if [[ $backend == vulkan ]]; then apt_need libvulkan-dev glslc spirv-headers; fi
    # the plugin builds without build isolation: CMake and ninja come from PATH
    if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
      python3 -m pip install -q cmake ninja
    fi
    "$ROOT/ci/build_backend.sh" "$backend" "${3:?$usage}"
    ;;
  test:vulkan)
    apt_need mesa-vulkan-drivers
    PYLLAMA_REQUIRE_PLUGINS=vulkan "$ROOT/ci/test_wheel.sh" "${3:?$usage}" "${4:?$usage}"
    ;;
  test:cuda)
    "$ROOT/ci/test_wheel.sh" "${3:?$usage}" "${4:?$usage}"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
