#!/usr/bin/env bash
# The release wheel on older x86-64 CPUs, emulated by qemu-user (CI does not run this: each
# emulated run takes minutes). For each CPU model, pyllama must pick the matching CPU
# variant, generate, and give the greedy text it gives natively; qemu raises SIGILL on any
# instruction the model lacks, so a wrong pick dies instead of passing.
#
#   ci/cpu_variants.sh dist/pyllama_engine-*-manylinux_2_34_x86_64.whl [MODEL.gguf]
#   MODELS="Nehalem:sse42 SandyBridge:sandybridge Haswell:haswell" (default)
set -euo pipefail
WHEEL=$(realpath "$1")
MODEL=${2:-}
MODELS=${MODELS:-"Nehalem:sse42 SandyBridge:sandybridge Haswell:haswell"}
command -v qemu-x86_64 >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq qemu-user >/dev/null; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q "$WHEEL"
PY="$WORK/venv/bin/python"
if [ -z "$MODEL" ]; then
  MODEL=$(cd "$WORK" && "$PY" -c "from pyllama.models import demo_model; print(demo_model())")
fi
# greedy text of a short prompt, and the CPU variant that produced it
cat >"$WORK/greedy.py" <<'EOF'
import sys
from pyllama import Llama
from pyllama.hardware import cpu_variant
llm = Llama(sys.argv[1], n_ctx=256, n_threads=1, verbose=False)
out = llm("The capital of France is", max_tokens=12, temperature=0.0)
print(cpu_variant())
print(repr(out["choices"][0]["text"]))
EOF
cd "$WORK"
native=$("$PY" greedy.py "$MODEL")
echo "native: $(echo "$native" | head -1): $(echo "$native" | tail -1)"
status=0
for entry in $MODELS; do
  cpu=${entry%%:*}
  want=${entry##*:}
  start=$(date +%s)
  if got=$(timeout 1800 qemu-x86_64 -cpu "$cpu" "$PY" greedy.py "$MODEL" 2>"$WORK/err"); then
    variant=$(echo "$got" | head -1)
    text=$(echo "$got" | tail -1)
    verdict=ok
    [ "$variant" = "$want" ] || verdict="FAIL (wanted variant $want)"
    [ "$text" = "$(echo "$native" | tail -1)" ] || verdict="FAIL (text differs from native)"
  else
    rc=$?
    variant="-" text="-" verdict="FAIL (exit $rc: $(tail -1 "$WORK/err"))"
  fi
  echo "qemu -cpu $cpu: variant $variant in $(($(date +%s) - start)) s: $text: $verdict"
  [ "$verdict" = ok ] || status=1
done
exit $status
