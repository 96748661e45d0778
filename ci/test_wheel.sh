#!/usr/bin/env bash
# The package tests on a built distribution: a fresh venv holding it (a wheel, or the
# sdist, which pip then builds) with the test extras and any plugin wheels, then this
# checkout's test suite run against that installed copy, not the source tree.
#
#   ci/test_wheel.sh DIST [PLUGIN_WHEEL...]
#   PYTHON=python3.11      the venv's interpreter (default: the Python of the wheel's cpXY
#                          tag on PATH; for the sdist or a py3 wheel, the python on PATH)
#   PYTEST_ARGS="-x -q"    more pytest arguments
#
# pytest runs in the checkout (the tests read README.md, pyproject.toml, the vocabularies
# in vendor/llama.cpp) through the venv's own pytest program: Python puts that program's
# folder first on sys.path, not the working directory, and pytest adds only tests/ and its
# subfolders (no __init__.py), so `import pyllama` is the installed copy.
# tests/package/test_installed_copy.py checks that, with PYLLAMA_TESTED_DIST set here.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ci/platform.sh
. "$ROOT/ci/platform.sh"
ROOT=$(native_path "$ROOT")
DIST=$(abs_file "${1:?usage: ci/test_wheel.sh DIST [PLUGIN_WHEEL...]}")
shift
plugins=()
names=$(basename "$DIST")
for p in "$@"; do
  plugins+=("$(abs_file "$p")")
  names+=" + $(basename "$p")"
done
if [[ -z "${PYTHON:-}" ]]; then
  if [[ "$(basename "$DIST")" =~ -cp3([0-9]+)- ]]; then
    PYTHON=$(python_for "3.${BASH_REMATCH[1]}")
  else
    PYTHON=$(default_python)
  fi
fi
WORK=$(native_path "$(mktemp -d)")
trap 'rm -rf "$WORK"' EXIT

"$PYTHON" -m venv "$WORK/venv"
BIN=$(venv_bin "$WORK/venv")
echo "test_wheel: $names into a fresh venv ($("$BIN/python" --version))"
"$BIN/python" -m pip install -q --disable-pip-version-check "${DIST}[test]" ${plugins[@]+"${plugins[@]}"}
# the vocabularies and models of vendor/llama.cpp the tests read (gitignored: a fresh
# checkout has none)
if [[ ! -f "$ROOT/vendor/llama.cpp/CMakeLists.txt" ]]; then
  "$BIN/python" "$ROOT/ci/fetch_vendor.py" --dest "$ROOT/vendor/llama.cpp"
fi

extra=()
read -r -a extra <<<"${PYTEST_ARGS:-}"
cd "$ROOT"
export PYLLAMA_TESTED_DIST="$DIST"
# test_install.py and test_sdist.py build this checkout from source (CI runs them); here
# the distribution under test is the one built already
"$BIN/pytest" -p no:cacheprovider \
  --ignore=tests/package/test_install.py --ignore=tests/package/test_sdist.py \
  ${extra[@]+"${extra[@]}"}
