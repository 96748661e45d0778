#!/usr/bin/env bash
# pyllama as a new user installs it, against llama.cpp built native for this machine (AMX
# off: some hosts report AMX yet die with SIGILL in its kernels), on the machine's CPU:
#   1. the peers built with GGML_NATIVE=ON (ci/build_peer.sh) into $PYLLAMA_CACHE/peer-native;
#   2. a fresh venv with the README's install (`pip install ".[server]"`, from this tree);
#   3. benchmarks/bench_server.py at 1 / 4 / 8 clients against the native llama-server;
#   4. benchmarks/bench_host_bound.py, -bs greedy (mode bs) and greedy with the default
#      flags, at 32 / 128 / 256 sequences against the native llama-batched-bench.
# Records go to benchmarks/results/native_peer_<date>.jsonl, each naming the CPU.
# On a machine without AVX-512 the native build is the x86-64-v3 one the other benchmarks
# use already: it refuses unless --any-cpu.
#   usage: benchmarks/native_peer_acceptance.sh [--any-cpu]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${PYLLAMA_CACHE:-$HOME/.cache/pyllama}"
if ! grep -qw avx512f /proc/cpuinfo && [ "${1:-}" != "--any-cpu" ]; then
  echo "$0: this CPU has no AVX-512 (--any-cpu runs it anyway)" >&2
  exit 2
fi
cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "$0: CPU: $cpu; ISA: $(grep -m1 -o 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"

peer="$cache/peer-native"
# GGML_NATIVE=ON compiles ggml with -march=native; the explicit -mno-amx-* win over it
CFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" CXXFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
  PEER_CMAKE_ARGS="-DGGML_NATIVE=ON" \
  PEER_TARGETS="llama-server llama-batched-bench llama-batched" "$root/ci/build_peer.sh" "$peer"

venv="$(mktemp -d)/venv"
python3 -m venv "$venv"
start=$(date +%s)
(cd "$root" && "$venv/bin/pip" install -q ".[server]")
install_s=$(( $(date +%s) - start ))
kernels="$(cd / && "$venv/bin/python" -c "import pyllama.hardware as h; print(h.summary())")"
echo "$0: the README's install took $install_s s; $kernels"

out="$root/benchmarks/results/native_peer_$(date +%F).jsonl"
python3 -c 'import json, sys; b, d, c, s, k = sys.argv[1:]; print(json.dumps(dict(bench=b, date=d, cpu=c, install_s=int(s), kernels=k)))' \
  native_peer "$(date +%F)" "$cpu" "$install_s" "$kernels" | tee -a "$out"
cd "$root/benchmarks"
# the demo model (the tiny model takes its tokenizer from it), fetched as the server would
(cd / && "$venv/bin/python" -c "import pyllama.models as m; m.fetch(m.DEMO_MODEL)")
# the tiny model is written with the gguf package, which the README's install does not
# bring: this interpreter (the test extras) writes it once into the cache
python3 -c "import bench_host_bound as b; from pathlib import Path; b.tiny_model(Path('$cache'))"
"$venv/bin/python" bench_server.py --llama-server "$peer/bin/llama-server" --threads 2 \
  --concurrency 1,4,8 --repeat 5 --json | tee -a "$out"
"$venv/bin/python" bench_host_bound.py --concurrency 32,128,256 --modes bs,greedy --bs-max 256 --rounds 5 --json \
  --batched "$peer/bin/llama-batched" --batched-bench "$peer/bin/llama-batched-bench" | tee -a "$out"
echo "$0: records in $out"
