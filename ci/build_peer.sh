#!/usr/bin/env bash
# Build llama.cpp's own tools (llama-server, llama-bench, llama-batched-bench, llama-batched,
# ggml-rpc-server) from the same vendor tree and with the same CPU flags as pyllama, OUTSIDE
# the repo. llama-batched is an example (LLAMA_BUILD_EXAMPLES): it samples every sequence,
# the like-for-like peer of benchmarks/bench_host_bound.py.
# They are the baseline that benchmarks and peer tests compare pyllama against.
#   usage: ci/build_peer.sh [BUILD_DIR]   (default: $PYLLAMA_CACHE/peer or ~/.cache/pyllama/peer)
#   PEER_TARGETS="llama-server" builds only those targets
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-${PYLLAMA_CACHE:-$HOME/.cache/pyllama}/peer}"
python3 "$root/ci/fetch_vendor.py"
# ggml compiles through ccache when it is there: paths relative to the tree, so clones share hits
export CCACHE_BASEDIR="$root" CCACHE_SLOPPINESS=time_macros
# Same compilers and flags as the package build (CMakeLists.txt), so ccache shares the
# ggml/llama objects with it and the binaries run the same kernels.
cmake -S "$root/vendor/llama.cpp" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="${CC:-gcc}" -DCMAKE_CXX_COMPILER="${CXX:-g++}" -DLLAMA_ALL_WARNINGS=OFF \
  -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DGGML_RPC=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF ${PEER_CMAKE_ARGS:-}
# PEER_TARGETS: a subset (CI builds llama-server alone, for the parity tests)
cmake --build "$out" -j "$(nproc)" --target ${PEER_TARGETS:-llama-server llama-bench llama-batched-bench llama-batched ggml-rpc-server}
echo "peer binaries in $out/bin"
