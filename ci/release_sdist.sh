#!/usr/bin/env bash
# The sdist job of the release workflow (.github/workflows/release.yml): the sdist from a
# fresh clone (ci/build_wheel.sh with no Python), then the package tests on it: pip builds
# it from source in a fresh venv (one CPU module: 3-14 minutes on 2 cores), as a user
# without a wheel for their machine gets it.
#
#   ci/release_sdist.sh OUT
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: ci/release_sdist.sh OUT}
PYTHONS=none "$ROOT/ci/build_wheel.sh" "$OUT"
sdist=$(sed -n 's/^build_wheel: sdist \([^ ]*\) .*/\1/p' "$OUT/build-report.txt")
"$ROOT/ci/test_wheel.sh" "$OUT/$sdist"
