#!/usr/bin/env bash
# llama.cpp's own llama-completion for Linux aarch64, cross-built from the same vendor tree
# and with the same CPU variants as the aarch64 wheel (ci/build_wheel_aarch64.sh): shared
# libraries, every CPU variant a module (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS), so that
# ggml's own loader picks the variant at run time. ci/cpu_variants_aarch64.sh compares the
# wheel's greedy text with it under each qemu CPU model.
#   usage: ci/build_peer_aarch64.sh [BUILD_DIR]
#   (default: $PYLLAMA_CACHE/peer-aarch64 or ~/.cache/pyllama/peer-aarch64); prints BUILD_DIR/bin
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out=$(realpath -m "${1:-${PYLLAMA_CACHE:-$HOME/.cache/pyllama}/peer-aarch64}")
"$root/ci/arm64_root.sh" >/dev/null # the cross compiler
python3 "$root/ci/fetch_vendor.py" >&2
# ggml compiles through ccache: paths relative to the tree, as the wheel's build, so the
# two share the CPU variants' objects
export CCACHE_BASEDIR="$root" CCACHE_SLOPPINESS=time_macros
# cmake/arm_variants.cmake: the same SME rule as the wheel (CMAKE_PROJECT_INCLUDE runs it
# right after llama.cpp's project(), before ggml is added)
cmake -S "$root/vendor/llama.cpp" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_PROJECT_INCLUDE="$root/cmake/arm_variants.cmake" \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DLLAMA_ALL_WARNINGS=OFF \
  -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF >&2
cmake --build "$out" -j "${JOBS:-2}" --target llama-completion >&2
echo "$out/bin"
