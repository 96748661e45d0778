#!/usr/bin/env bash
# The CPU image built and served with podman on a machine with no image registry (CI does
# not run it: a cold wheel build alone takes ~30 minutes on 2 cores).
#
#   apt-get install -y podman debootstrap runc      # Debian 12's podman 4.3
#   ci/container/check.sh
#
# 1. the base: ci/container/base.sh (debootstrap) unless BASE names an image already in
#    podman's store (FRESH_BASE=1 remakes it, to time a cold one);
# 2. the wheel: the newest $DIST/pyllama_engine-*-cpXY-*manylinux*.whl (DIST: dist/) for the
#    base's Python, else ci/build_wheel.sh makes one;
# 3. the build context: that wheel and its dependencies' wheels (pip download, through this
#    machine's pip configuration), so the image builds with --network none;
# 4. podman build of deploy/container/Containerfile.cpu, no cache;
# 5. the image's own entrypoint and command, with the cached demo model mounted (-m through
#    LLAMA_ARG_MODEL, --offline): health, one chat and /metrics through the published port;
# 6. the KServe ClusterServingRuntime's container (deploy/kserve/cluster-serving-runtime.yaml)
#    as its pod would run it (ci/container/kserve_run.py): same checks.
# Writes a summary to $OUT (default: $DIST/container-report.txt).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=ci/container/podman.sh
. "$HERE/podman.sh"
podman_setup
BASE=${BASE:-localhost/pyllama-base:bookworm}
IMAGE=${IMAGE:-localhost/pyllama:cpu}
PORT=${PORT:-18080}
KSERVE_PORT=${KSERVE_PORT:-18081}
RUNTIME=$ROOT/deploy/kserve/cluster-serving-runtime.yaml
DIST=${DIST:-$ROOT/dist}
OUT=${OUT:-$DIST/container-report.txt}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
WORK=$(mktemp -d /var/tmp/pyllama-check.XXXXXX)
containers=()
cleanup() {
  local c
  for c in ${containers[@]+"${containers[@]}"}; do
    "${PODMAN[@]}" rm --force --time 10 "$c" >/dev/null 2>&1 || true
  done
  rm -rf "$WORK" "$(dirname "$CONTAINERS_CONF")"
}
trap cleanup EXIT
T0=$(date +%s)
say() { echo "check [+$(($(date +%s) - T0)) s]: $*" | tee -a "$OUT"; }
mb() { "${PODMAN[@]}" image inspect --format '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1 / 1e6}'; }

# 1. the base
if [[ ${FRESH_BASE:-0} == 1 ]] || ! "${PODMAN[@]}" image exists "$BASE"; then
  "${PODMAN[@]}" rmi --force "$BASE" >/dev/null 2>&1 || true
  start=$(date +%s)
  "$HERE/base.sh" "$BASE" | tee -a "$OUT"
  say "base made cold (debootstrap + podman import) in $(($(date +%s) - start)) s"
fi
say "base $BASE: $(mb "$BASE")"
pyver=$("${PODMAN[@]}" run --rm --network none "$BASE" python3 -c \
  'import sys; print("%d.%d" % sys.version_info[:2])')

# 2. the wheel
tag=cp${pyver/./}
wheel=$(ls -t "$DIST"/pyllama_engine-*-"$tag"-"$tag"-manylinux*_x86_64.whl 2>/dev/null | head -1 || true)
if [[ -z "$wheel" ]]; then
  say "no $tag wheel in $DIST: ci/build_wheel.sh"
  PYTHONS=$pyver "$ROOT/ci/build_wheel.sh" "$DIST"
  wheel=$(ls -t "$DIST"/pyllama_engine-*-"$tag"-"$tag"-manylinux*_x86_64.whl | head -1)
fi
version=$(basename "$wheel" | cut -d- -f2)
say "wheel $(basename "$wheel") $(du -h "$wheel" | cut -f1)"

# 3. the build context: no network inside the build
mkdir "$WORK/context"
cp "$wheel" "$WORK/context/"
python3 -m pip download -q --disable-pip-version-check -d "$WORK/context" \
  --find-links "$WORK/context" --only-binary :all: --python-version "$pyver" \
  "pyllama-engine[server]==$version" >"$WORK/download.log" 2>&1 || { cat "$WORK/download.log"; exit 1; }
# pip may also have fetched another build of this version from a configured find-links
find "$WORK/context" -name 'pyllama_engine-*' ! -name "$(basename "$wheel")" -delete
say "build context: $(find "$WORK/context" -name '*.whl' | wc -l) wheels, $(du -sh "$WORK/context" | cut -f1)"

# 4. the image (the one it replaces is removed, not left dangling)
previous=$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
start=$(date +%s)
"${PODMAN[@]}" build --no-cache --pull=never --network none --build-arg "BASE=$BASE" \
  --build-arg PIP_NO_INDEX=1 --build-arg "PYLLAMA_VERSION=$version" \
  -t "$IMAGE" -f "$ROOT/deploy/container/Containerfile.cpu" "$WORK/context" >"$WORK/build.log" 2>&1 ||
  { tail -30 "$WORK/build.log"; exit 1; }
[[ -z "$previous" ]] || "${PODMAN[@]}" rmi "$previous" >/dev/null 2>&1 || true
say "image $IMAGE built in $(($(date +%s) - start)) s (no cache, no network): $(mb "$IMAGE")"
user=$("${PODMAN[@]}" image inspect --format '{{.Config.User}}' "$IMAGE")
[[ "$user" =~ ^[1-9][0-9]*$ ]] || { say "FAIL: the image's USER is '$user', not a non-zero uid"; exit 1; }

# the demo model, as KServe's storage initializer leaves a model: a folder
model=$(cd "$WORK" && python3 -c 'from pyllama.models import demo_model; print(demo_model())')
mkdir -m 755 "$WORK/models"
ln "$model" "$WORK/models/model.gguf" 2>/dev/null || cp "$model" "$WORK/models/model.gguf"
chmod 644 "$WORK/models/model.gguf"

# Wait for a container's health path to answer 200; fail early if the container stops
serve() {
  local name=$1 url=$2 start state
  start=$(date +%s)
  until curl -sf -o /dev/null "$url"; do
    state=$("${PODMAN[@]}" inspect --format '{{.State.Status}}' "$name")
    if [[ "$state" != running ]] || (($(date +%s) - start > 600)); then
      "${PODMAN[@]}" logs --tail 30 "$name" || true
      say "FAIL: $name is $state and $url does not answer"
      exit 1
    fi
    sleep 2
  done
  say "$name healthy $(($(date +%s) - start)) s after start"
}

# 5. the image's own entrypoint and command
name=pyllama-check-cpu
"${PODMAN[@]}" rm --force "$name" >/dev/null 2>&1 || true
containers+=("$name")
"${PODMAN[@]}" run -d --name "$name" --publish "127.0.0.1:$PORT:8080" \
  --volume "$WORK/models:/models:ro" --env LLAMA_ARG_MODEL=/models/model.gguf \
  --env LLAMA_ARG_OFFLINE=1 "$IMAGE" >/dev/null
serve "$name" "http://127.0.0.1:$PORT/health"
say "$name: $(python3 "$HERE/chat.py" "http://127.0.0.1:$PORT")"

# 6. the KServe runtime's container, as its pod runs it
name=pyllama-check-kserve
"${PODMAN[@]}" rm --force "$name" >/dev/null 2>&1 || true
mapfile -d '' run_args < <(python3 "$HERE/kserve_run.py" "$RUNTIME" "$IMAGE" "$WORK/models" \
  "$KSERVE_PORT" smollm2)
probe=${run_args[0]} non_root=${run_args[1]}
run_args=("${run_args[@]:2}")
say "KServe runtime: $(printf '%q ' "${run_args[@]}")"
[[ $non_root == 0 || $user != 0 ]] || { say "FAIL: runAsNonRoot and the image runs as root"; exit 1; }
containers+=("$name")
"${PODMAN[@]}" run -d --name "$name" "${run_args[@]}" >/dev/null
serve "$name" "http://127.0.0.1:$KSERVE_PORT$probe"
alias=()
printf '%s\n' "${run_args[@]}" | grep -qx -e --alias=smollm2 -e smollm2 && alias=(smollm2)
say "$name: $(python3 "$HERE/chat.py" "http://127.0.0.1:$KSERVE_PORT" ${alias[@]+"${alias[@]}"})"
say "OK"
