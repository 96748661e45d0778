#!/usr/bin/env bash
# Cross-builds pyllama for Windows x86-64 with Debian's MinGW-w64 (the test vehicle run
# under wine by ci/windows/check.sh): _core and its DLLs for python.org's CPython, and
# llama.cpp's own llama-simple from the same tree for the greedy comparison.
#
#   ci/windows/build.sh [BUILD_DIR]   (default build/win64; the CPython from
#                                     python_embed.py in build/win-python)
# Needs: apt-get install g++-mingw-w64-x86-64-posix gcc-mingw-w64-x86-64-posix
#        mingw-w64-tools wine64; cmake and ninja; a local CPython 3.13 for its headers.
# Two of ggml's x86 CPU variants, x64 and haswell (a test build: pyllama's choice between
# variants shows with two; the release builds all fourteen), no OpenMP (ggml's own
# thread pool; MinGW's libgomp is not what a release ships).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${1:-build/win64}
mkdir -p "$out" && out=$(cd "$out" && pwd)
py=${PYLLAMA_WIN_PYTHON:-build/win-python}
[ -f "$py/libpython313.dll.a" ] || python ci/windows/python_embed.py --dest "$py"
# a CPython 3.13 for this machine, for CMake's FindPython (pyenv's shims are not usable
# while another version is selected)
host_python=$(python - <<'PY'
import glob, os, shutil, subprocess
found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13")))
exe = found[-1] if found else shutil.which("python3.13")
ok = exe and subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0
print(exe if ok else "")
PY
)
[ -n "$host_python" ] || { echo "ci/windows/build.sh: no CPython 3.13 here (its headers and FindPython need one)"; exit 1; }
[ -f vendor/llama.cpp/CMakeLists.txt ] || python ci/fetch_vendor.py --dest vendor/llama.cpp
# FindPython, cross-compiling, gives the extension the link flags of this machine's CPython
# (sysconfig's LIBS: -ldl -lm); MinGW has libm but no libdl, whose functions Windows has in
# kernel32: an empty archive answers -ldl
mkdir -p "$out/mingw-libs"
[ -f "$out/mingw-libs/libdl.a" ] || x86_64-w64-mingw32-ar rcs "$out/mingw-libs/libdl.a"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR="$root" CCACHE_SLOPPINESS=time_macros
cmake -S . -B "$out" -G Ninja "${launcher[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$root/ci/windows/mingw-w64.cmake" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_MODULE_LINKER_FLAGS="-L$out/mingw-libs" \
  -DSKBUILD_PROJECT_VERSION="$(python -c "import tomllib;print(tomllib.load(open('pyproject.toml','rb'))['project']['version'])")" \
  -DPython_EXECUTABLE="$host_python" \
  -DPython_INCLUDE_DIR="$root/$py/include" \
  -DPython_LIBRARY="$root/$py/libpython313.dll.a" \
  -DPYTHON_MODULE_EXTENSION=.cp313-win_amd64.pyd -DPYTHON_MODULE_DEBUG_POSTFIX= \
  -Dpybind11_DIR="$(python -m pybind11 --cmakedir)" \
  -DPYLLAMA_CPU_ALL_VARIANTS=ON -DPYLLAMA_CPU_VARIANTS="x64;haswell" \
  -DGGML_OPENMP=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_CURL=OFF \
  -DCMAKE_INSTALL_PREFIX="$out/install" >"$out.configure.log" 2>&1 ||
  { tail -40 "$out.configure.log"; exit 1; }
[ "${CONFIGURE_ONLY:-0}" = 1 ] && exit 0
cmake --build "$out" --target _core llama-simple
cmake --install "$out" --component pyllama
# MinGW's C++ runtime beside the other DLLs (a release build links MSVC's instead)
for dll in libstdc++-6.dll libgcc_s_seh-1.dll; do
  cp "$(x86_64-w64-mingw32-g++-posix -print-file-name=$dll)" "$out/install/pyllama/lib/"
done
cp /usr/x86_64-w64-mingw32/lib/libwinpthread-1.dll "$out/install/pyllama/lib/"
echo "ci/windows/build.sh: $out/install/pyllama and $out/bin/llama-simple.exe"
