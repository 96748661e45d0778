#!/usr/bin/env bash
# The GPU checks of docs/distribution.md, on a machine with an NVIDIA GPU, nvcc, CMake and a
# Python with scikit-build-core and pybind11, and no network (CI never runs this).
#
#   ci/gpu_check.sh build   the core (one CPU module), the CUDA plugin (ci/build_backend.sh)
#                           and llama-server (ci/build_peer.sh, shared with GGML_BACKEND_DL),
#                           in parallel, all into build/gpu-check/ (under build/, so that a
#                           copy of the tree that keeps ignored build outputs keeps them)
#   ci/gpu_check.sh flags   ci/gpu_flags.py: -ngl, -nkvo, -ot, --fit against llama-server
#   ci/gpu_check.sh benches bench_shared_prefix and bench_python_api (-ngl 99) on the GPU
#   ci/gpu_check.sh embeddings  bench_embeddings (-ngl 99): /v1/embeddings and /v1/rerank
#                           against llama-server at 1 / 4 / 16 clients, 1 / 32 / 256 texts;
#                           EMBED_MODEL (an encoder GGUF; the reranker is derived from it)
#   ci/gpu_check.sh check   plugin found, devices listed, full offload (log and /props),
#                           greedy parity against llama-server, bench_server and
#                           bench_engine ratios; everything it prints goes to $OUT too
#
#   CUDA_ARCHS=90 (default)  MODEL=build/gpu-check/model.gguf  THREADS=8  ONLY= (flags: a case)
#   WHEELS=.gpu/whl          server dependencies as wheels, installed with --no-index
#   VENDOR_TAR=.gpu/vendor.tar.gz  the vendor tree where vendor/llama.cpp is not there
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
G=$ROOT/build/gpu-check
OUT=${OUT:-$G/results}
mkdir -p "$G" "$OUT"
export CUDA_ARCHS=${CUDA_ARCHS:-90}
MODEL=${MODEL:-$G/model.gguf}
THREADS=${THREADS:-8}
PY=${PYTHON:-python3}
# llama-server from the same tree, built with BUILD_SHARED_LIBS and GGML_BACKEND_DL as
# llama.cpp's release builds are; its CUDA module is the plugin's libggml-cuda.so (one
# nvcc build of the same sources for both sides: the comparison is of the engines)
PEER=$G/peer-dl

build() {
  # a tarball of llama.cpp/ (pruned: no models, docs)
  [[ -f vendor/llama.cpp/CMakeLists.txt ]] || { mkdir -p vendor && tar xzf "${VENDOR_TAR:-.gpu/vendor.tar.gz}" -C vendor; }
  "$PY" -m pip install -q --no-deps --no-index "${WHEELS:-.gpu/whl}"/*.whl
  # both builds want every core; each gets all of them and the kernel shares
  export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
  (
    "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$G/core" . -Cbuild-dir="$G/build-core" &&
      "$PY" -m pip install -q --no-deps --no-index --force-reinstall "$G"/core/pyllama_engine-*.whl &&
      echo "gpu_check: core built"
  ) >"$G/core.log" 2>&1 &
  core=$!
  (FROM_TREE=1 CUDA_TOOLKIT=system BUILD_DIR="$G/build-plugin" ci/build_backend.sh cuda "$G/plugin" &&
    "$PY" -m pip install -q --no-deps --no-index --force-reinstall "$G"/plugin/pyllama_engine_cuda13-*.whl &&
    echo "gpu_check: plugin built") >"$G/plugin.log" 2>&1 &
  plugin=$!
  (PEER_CMAKE_ARGS="-DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON" \
    ci/build_peer.sh "$PEER" && echo "gpu_check: peer built") >"$G/peer.log" 2>&1 &
  peer=$!
  rc=0
  for job in core:$core plugin:$plugin peer:$peer; do
    wait "${job#*:}" || { rc=1; echo "gpu_check: ${job%%:*} failed"; tail -30 "$G/${job%%:*}.log"; }
  done
  for f in "$G"/*.log; do tail -n 3 "$f"; done
  cp "$G"/*.log "$OUT/" 2>/dev/null || true
  return $rc
}

peer_plugin() {
  [[ -f "$MODEL" ]] || { echo "gpu_check: no model at $MODEL" >&2; return 1; }
  # the peer loads the plugin's module from its bin/; the module's RUNPATH
  # ($ORIGIN/../../pyllama/lib, $ORIGIN/../../nvidia/cu13/lib) is given the peer's
  # libggml-base (the loaded one: same file) and the nvidia-* wheels' libraries
  plugin=$("$PY" -c "import pyllama_plugins, os; print(os.path.join(list(pyllama_plugins.__path__)[0], 'cuda'))")
  cp "$plugin/libggml-cuda.so" "$PEER/bin/"
  mkdir -p "$G/pyllama"
  ln -sfn "$PEER/bin" "$G/pyllama/lib"
  ln -sfn "$("$PY" -c "import nvidia, os; print(list(nvidia.__path__)[0])")" "$G/nvidia"
}

check() {
  exec > >(tee "$OUT/check.log") 2>&1
  peer_plugin
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  cd /tmp # outside the source tree, whose pyllama/ has no _core
  "$PY" -c "import pyllama, pyllama.plugins as p; print(p.plugins()); print(pyllama.backends())"
  pyllama-server --list-devices
  "$PEER/bin/llama-server" --list-devices
  # full offload: the startup line and /props
  "$PY" - "$MODEL" <<'PY'
import json, os, subprocess, sys, time, urllib.request
proc = subprocess.Popen(["pyllama-server", "-m", sys.argv[1], "-ngl", "99", "--port", "18080"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for line in proc.stdout:  # up to the devices line; the offload line follows it
    if "pyllama-server" in line:
        print(line.rstrip())
    if "devices:" in line:
        break
time.sleep(0.5)
os.set_blocking(proc.stdout.fileno(), False)
print(proc.stdout.read() or "")
props = json.load(urllib.request.urlopen("http://127.0.0.1:18080/props"))
print("props offload:", props["offloaded_layers"], "/", props["offloadable_layers"],
      [d["name"] for d in props["devices"]])
proc.terminate(); proc.wait()
PY
  cd "$ROOT/benchmarks"
  timeout 120 "$PY" parity_llama_server.py --model "$MODEL" --threads "$THREADS" --server "$PEER/bin/llama-server" \
    | tee "$OUT/parity.jsonl" || true
  timeout 150 "$PY" bench_engine.py --model "$MODEL" --threads "$THREADS" --concurrency 1,4,8,16,32 --repeat 2 \
    --batched-bench "$PEER/bin/llama-batched-bench" --json | tee "$OUT/bench_engine.jsonl" || true
  timeout 200 "$PY" bench_server.py --model "$MODEL" --threads "$THREADS" --concurrency 1,4,8,16 --parallel 16 \
    --repeat 2 --llama-server "$PEER/bin/llama-server" --json | tee "$OUT/bench_server.jsonl" || true
}

# the placement flags against llama-server (ci/gpu_flags.py)
flags() {
  exec > >(tee "$OUT/flags.log") 2>&1
  peer_plugin
  cd /tmp
  "$PY" "$ROOT/ci/gpu_flags.py" --model "$MODEL" --llama-server "$PEER/bin/llama-server" \
    --threads "$THREADS" --out "$OUT/flags" --only "${ONLY:-}" | tee "$OUT/flags.jsonl"
}

# the benchmarks added after the first CUDA check (2026-11-24): shared prompt prefixes (the default
# waves, then 32 clients on a 4,000-token system prompt) and the Python API's batching
benches() {
  exec > >(tee "$OUT/benches.log") 2>&1
  peer_plugin
  cd "$ROOT/benchmarks"
  timeout 120 "$PY" bench_python_api.py --side pyllama -ngl 99 --model "$MODEL" --threads "$THREADS" \
    --concurrency 1,8,32 | tee "$OUT/python_api.jsonl" || true
  local sp=(--model "$MODEL" --threads "$THREADS" --llama-server "$PEER/bin/llama-server" --json)
  timeout 180 "$PY" bench_shared_prefix.py "${sp[@]}" --repeat 2 --waves 3 || true
  timeout 240 "$PY" bench_shared_prefix.py "${sp[@]}" --repeat 2 --waves 3 --clients 32 \
    --parallel 32 --ctx-size 262144 --system-tokens 4000 || true
  cp results/shared_prefix_*.jsonl "$OUT/" 2>/dev/null || true
}

# embeddings and rerank against llama-server, all layers on the GPU: with a decode of a few
# short texts taking well under a millisecond there, the request path's own cost shows
embeddings() {
  exec > >(tee "$OUT/embeddings.log") 2>&1
  peer_plugin
  local model=${EMBED_MODEL:?EMBED_MODEL: an encoder GGUF (all-MiniLM-L6-v2)}
  cd "$ROOT/benchmarks"
  local rerank
  rerank=$(cd "$ROOT/tests" && "$PY" -c "import sys; from helpers.derived_models import rerank_model; print(rerank_model(sys.argv[1]))" "$model")
  local eb=(--threads "$THREADS" --llama-server "$PEER/bin/llama-server" --server-flags="-ngl 99" --repeat 3)
  timeout 240 "$PY" bench_embeddings.py "${eb[@]}" --model "$model" | tee "$OUT/embeddings.txt" || true
  timeout 240 "$PY" bench_embeddings.py "${eb[@]}" --model "$rerank" --rerank | tee "$OUT/rerank.txt" || true
}

case "${1:-}" in
  build) build ;;
  check) check ;;
  flags) flags ;;
  benches) benches ;;
  embeddings) embeddings ;;
  *) echo "usage: ci/gpu_check.sh build|check|flags|benches|embeddings" >&2; exit 2 ;;
esac
