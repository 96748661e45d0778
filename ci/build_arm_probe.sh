#!/usr/bin/env bash
# The quick Linux ARM build for CI: ggml with its ARM CPU variants as modules and arm_probe
# (ci/arm_probe/), cross-compiled with Debian's aarch64 GCC; tests/package/
# test_arm_variants.py runs it as qemu-aarch64 CPU models. Installs the cross compiler and
# qemu-user when missing.
#   usage: ci/build_arm_probe.sh [BUILD_DIR]
#   (default: $PYLLAMA_CACHE/arm-probe or ~/.cache/pyllama/arm-probe); prints BUILD_DIR/bin
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out=$(realpath -m "${1:-${PYLLAMA_CACHE:-$HOME/.cache/pyllama}/arm-probe}")
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user >/dev/null
fi
python3 "$root/ci/fetch_vendor.py" >&2
# ccache with paths relative to the tree, as the wheel builds: the variants' objects are shared
export CCACHE_BASEDIR="$root" CCACHE_SLOPPINESS=time_macros
cmake -S "$root/ci/arm_probe" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" >&2
cmake --build "$out" -j "${JOBS:-$(nproc)}" --target arm_probe >&2
echo "$out/bin"
