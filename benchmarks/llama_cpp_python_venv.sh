#!/usr/bin/env bash
# A venv holding llama-cpp-python 0.3.36, built from the pinned sdist that ci/fetch_vendor.py
# caches, with pyllama's default CPU flags (x86-64-v3, no -march=native), for
# benchmarks/bench_python_api.py. Never used by CI or the tests.
#   benchmarks/llama_cpp_python_venv.sh [VENV]   (default ~/.cache/pyllama/bench-lcp-venv)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/pyllama/bench-lcp-venv}"
sdist="$(python "$here/ci/fetch_vendor.py" --print-sdist)"
python -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q numpy
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$venv/bin/pip" install -v "$sdist"
"$venv/bin/python" -c "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__)"
