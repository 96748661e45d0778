#!/usr/bin/env bash
# One wheel job of the release workflow (.github/workflows/release.yml), end to end: the
# core wheels (ci/build_wheel.sh), then each one's package tests in a fresh venv
# (ci/test_wheel.sh). The Linux x86-64 job runs exactly this in a Debian 12 container, the
# macOS arm64 and Windows x86-64 jobs on their runners.
#
#   ci/release_wheel.sh OUT      (PYTHONS, PLAT... as ci/build_wheel.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: ci/release_wheel.sh OUT}
"$ROOT/ci/build_wheel.sh" "$OUT"
# the wheels this build made (OUT may hold older ones), as its report names them:
# "build_wheel: wheel NAME SIZE in N s; ..."
wheels=$(sed -n 's/^build_wheel: wheel \([^ ]*\) .*/\1/p' "$OUT/build-report.txt")
if [[ -z "$wheels" ]]; then
  echo "release_wheel: the build made no wheel" >&2
  exit 1
fi
for wheel in $wheels; do
  "$ROOT/ci/test_wheel.sh" "$OUT/$wheel"
done
