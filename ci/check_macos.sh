#!/usr/bin/env bash
# The macOS arm64 compile check, on Linux: zig's clang (the PyPI package ziglang, which
# carries Apple's libc headers and libSystem.tbd) compiles for aarch64-macos what the macOS
# wheel builds from C and C++ (ci/build_wheel.sh's macos branch, docs/distribution.md):
#   - _core: every source of csrc/, csrc/core/ and csrc/engine/, with _core's defines
#   - llama-server's chat request side linked into _core (tools/server: server-common,
#     server-chat, server-task)
#   - ggml-base and ggml (libggml: the backend registry and loader)
#   - ggml-cpu as GGML_CPU_ALL_VARIANTS builds it on Apple: apple_m1, apple_m2_m3,
#     apple_m4, each with its feature-score object (cpu-feats.cpp)
#   - ggml-rpc, and the C++ part of ggml-metal
#   - ggml-metal's embedded shader library (GGML_METAL_EMBED_LIBRARY): each kernel source
#     concatenated with its headers as ggml/src/ggml-metal/CMakeLists.txt does it, wrapped in
#     an .incbin assembly file, assembled, and its start/end symbols checked in the object
# Objects only: nothing is linked (Foundation, Metal and Accelerate are not in zig's SDK
# headers, so ggml-metal's Objective-C files, ggml-blas and ggml-cpu's Accelerate calls are
# not compiled), and nothing runs. docs/distribution.md says what this does not prove.
#
#   ci/check_macos.sh
#   JOBS=2                      compiles at once (default 2)
#   MACOSX_DEPLOYMENT_TARGET    the macOS version compiled for (default 14.0, as the wheel)
#   MACOS_CHECK_DIR=DIR         keep the objects, logs and generated sources in DIR (default:
#                               a temporary folder, the generated sources in $PYLLAMA_CACHE)
#   PYTHON=python3              the Python whose ziglang, pybind11 and headers are used
#
# Installs ziglang (pinned below) into that Python when it lacks it. Needs pybind11 there
# (the bindings' headers). Exits non-zero if any file fails; every file is tried first.
# About 6 CPU-minutes cold; zig caches each object by its inputs (~/.cache/zig), so a rerun
# compiles only what changed (and shows no warnings for the files it did not recompile).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
start=$(date +%s)
ZIGLANG_VERSION=0.17.1 # zig 0.17.1: clang 22
PY=${PYTHON:-python3}
JOBS=${JOBS:-2}
MACOS_MIN=${MACOSX_DEPLOYMENT_TARGET:-14.0}
[[ $MACOS_MIN == *.* ]] || MACOS_MIN="$MACOS_MIN.0"
TARGET="aarch64-macos.$MACOS_MIN"
V=vendor/llama.cpp
G=$V/ggml/src

if ! "$PY" -m ziglang version >/dev/null 2>&1; then
  echo "check_macos: installing ziglang==$ZIGLANG_VERSION" >&2
  "$PY" -m pip install -q "ziglang==$ZIGLANG_VERSION"
fi
ZIG=$("$PY" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
PYBIND11_INC=$("$PY" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null) || {
  echo "check_macos: pybind11 missing for $PY (pip install pybind11)" >&2
  exit 2
}
PYTHON_INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[[ -f $V/CMakeLists.txt ]] || "$PY" ci/fetch_vendor.py --dest "$V" >&2
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -1)

if [[ -n ${MACOS_CHECK_DIR:-} ]]; then
  WORK=$(mkdir -p "$MACOS_CHECK_DIR" && cd "$MACOS_CHECK_DIR" && pwd)
  rm -rf "$WORK/obj" "$WORK/logs"
  GEN=$WORK/gen
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  # the generated sources (ggml-version.h, the embedded Metal library, 5 MB) at a path that
  # stays the same between runs: zig's cache keys on the include and .incbin paths too
  GEN=${PYLLAMA_CACHE:-$HOME/.cache/pyllama}/check-macos
fi
mkdir -p "$WORK/obj" "$WORK/logs" "$GEN"
# put FILE: stdin into FILE, leaving FILE alone when it holds that already
put() {
  cat >"$1.new.$$"
  if cmp -s "$1.new.$$" "$1"; then rm -f "$1.new.$$"; else mv -f "$1.new.$$" "$1"; fi
}
: >"$WORK/all.txt"
: >"$WORK/failed.txt"
: >"$WORK/times.txt"
echo "check_macos: zig $("$ZIG" version), target $TARGET, $JOBS jobs, in $WORK"

# -O0 keeps it quick; zig's own default for C at -O0 is UBSan, which the real build has not
COMMON=(-target "$TARGET" -O0 -g0 -fno-sanitize=all -fPIC)
# what llama.cpp's CMake defines for every ggml target on Darwin (ggml/src/CMakeLists.txt)
GGML_DEFS=(-DGGML_SHARED -DGGML_BACKEND_DL -DGGML_SCHED_MAX_COPIES=4 -D_XOPEN_SOURCE=600
  -D_DARWIN_C_SOURCE)
BACKEND_DEFS=("${GGML_DEFS[@]}" -DGGML_BACKEND_BUILD -DGGML_BACKEND_SHARED)

# compile GROUP SOURCE FLAGS...: in the background, at most $JOBS at once; a failure is
# recorded and reported at the end
compile() {
  local group=$1 src=$2
  shift 2
  local name="$group/${src#"$ROOT"/}" driver=(c++ -std=gnu++17)
  [[ $src == *.c ]] && driver=(cc -std=gnu11)
  [[ $src == *.s ]] && driver=(cc)
  local rel=${src#"$ROOT"/}
  rel=${rel#"$GEN"/}
  local obj="$WORK/obj/$group/${rel//\//__}.o" log="$WORK/logs/${name//\//__}.log"
  mkdir -p "$(dirname "$obj")"
  echo "$name" >>"$WORK/all.txt"
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
  (
    t0=$(date +%s%N)
    if ! "$ZIG" "${driver[@]}" "${COMMON[@]}" "$@" -c "$src" -o "$obj" >"$log" 2>&1; then
      echo "$name" >>"$WORK/failed.txt"
      rm -f "$obj"
    fi
    echo "$((($(date +%s%N) - t0) / 1000000)) $name" >>"$WORK/times.txt"
  ) &
}

# --- _core (CMakeLists.txt: pybind11_add_module(_core ...), its defines and warnings).
# The host's Python headers stand in for the macOS Python's (they are portable headers);
# macOS's pyconfig.h defines _DARWIN_C_SOURCE, which the host's does not.
CORE_FLAGS=(-fvisibility=hidden -Wall -Wextra -Wno-unused-parameter
  -DGGML_BACKEND_DL -DGGML_SHARED -DLLAMA_SHARED -DPYLLAMA_BACKEND_DL
  "-DPYLLAMA_VERSION=\"$VERSION\"" -D_DARWIN_C_SOURCE=1
  -Icsrc -I$V/include -I$V/ggml/include -I$V/common -I$V/tools/mtmd -I$V/vendor
  -I$V/tools/server -I$V
  -isystem "$PYTHON_INC" -isystem "$PYBIND11_INC")
for src in csrc/*.cpp csrc/core/*.cpp csrc/engine/*.cpp; do
  compile _core "$src" "${CORE_FLAGS[@]}"
done
# llama-server's chat request side, linked into _core (CMakeLists.txt: pyllama-server-chat)
for src in server-common.cpp server-chat.cpp server-task.cpp; do
  compile pyllama-server-chat "$V/tools/server/$src" -w -DLLAMA_SHARED -I$V/include -I$V/ggml/include \
    -I$V/common -I$V/tools/mtmd -I$V/tools/server -I$V -I$V/vendor
done

# --- ggml-base and ggml (ggml/src/CMakeLists.txt); ggml-version.h as its configure_file
sed -e "s/@GGML_VERSION@/$(sed -n 's/^set(GGML_VERSION_BASE "\(.*\)")$/\1/p' $V/ggml/CMakeLists.txt)/" \
  -e 's/@GGML_BUILD_COMMIT@/unknown/' $G/ggml-version.h.in | put "$GEN/ggml-version.h"
for src in ggml.c ggml.cpp ggml-alloc.c ggml-backend.cpp ggml-backend-meta.cpp ggml-opt.cpp \
  ggml-threading.cpp ggml-quants.c gguf.cpp; do
  compile ggml-base "$G/$src" -w "${GGML_DEFS[@]}" -DGGML_BUILD -I$G -I"$GEN" -I$V/ggml/include
done
for src in ggml-backend-dl.cpp ggml-backend-reg.cpp; do
  compile ggml "$G/$src" -w "${GGML_DEFS[@]}" -DGGML_BUILD -I$V/ggml/include
done

# --- ggml-cpu, GGML_CPU_ALL_VARIANTS on Apple (ggml/src/CMakeLists.txt):
#   apple_m1 DOTPROD; apple_m2_m3 DOTPROD MATMUL_INT8; apple_m4 DOTPROD MATMUL_INT8 NOSVE SME
# which ggml-cpu/CMakeLists.txt compiles with the -march and GGML_USE_* below. zig's driver
# takes CPUs as -mcpu=generic+<LLVM features> instead, and cannot take away a feature that
# an architecture level implies (v9.2a implies SVE2), so apple_m4's +nosve goes to clang's
# front end; the ACLE macros (__ARM_FEATURE_*, which ggml's kernels choose on) must then be
# the ones clang itself gives llama.cpp's -march.
NOSVE="-Xclang -target-feature -Xclang -sve -Xclang -target-feature -Xclang -sve2"
CPU_SOURCES=(ggml-cpu.c ggml-cpu.cpp repack.cpp hbm.cpp quants.c traits.cpp amx/amx.cpp
  amx/mmq.cpp tiled/tiled.cpp tiled/tiled-kernel.cpp binary-ops.cpp unary-ops.cpp vec.cpp
  ops.cpp llamafile/sgemm.cpp arch/arm/quants.c arch/arm/repack.cpp)
VARIANTS=(
  "apple_m1|armv8.2-a+dotprod|-mcpu=generic+v8_2a+dotprod|DOTPROD"
  "apple_m2_m3|armv8.6-a+dotprod+i8mm|-mcpu=generic+v8_6a+dotprod+i8mm|DOTPROD MATMUL_INT8"
  "apple_m4|armv9.2-a+dotprod+i8mm+nosve+sme|-mcpu=generic+v9_2a+dotprod+i8mm+sme $NOSVE|DOTPROD MATMUL_INT8 SME"
)
acle() { grep -E '^#define __ARM_(FEATURE_[A-Za-z0-9_]+|ARCH[A-Za-z0-9_]*) ' | sort; }
macro_errors=0
for entry in "${VARIANTS[@]}"; do
  IFS='|' read -r variant march zigflags uses <<<"$entry"
  read -r -a vflags <<<"$zigflags"
  defs=()
  for u in $uses; do defs+=("-DGGML_USE_$u"); done
  ours=$("$ZIG" cc "${COMMON[@]}" "${vflags[@]}" -E -dM -x c /dev/null | acle)
  clangs=$("$ZIG" clang -target "arm64-apple-macos$MACOS_MIN" -march="$march" -nostdinc \
    -E -dM -x c /dev/null | acle)
  if [[ "$ours" != "$clangs" ]]; then
    echo "check_macos: ggml-cpu-$variant: the ACLE macros differ from -march=$march's:" >&2
    diff <(echo "$clangs") <(echo "$ours") >&2 || true
    macro_errors=$((macro_errors + 1))
  fi
  for src in "${CPU_SOURCES[@]}"; do
    compile "ggml-cpu-$variant" "$G/ggml-cpu/$src" -w "${BACKEND_DEFS[@]}" "${vflags[@]}" \
      "${defs[@]}" -DGGML_USE_CPU_REPACK -DGGML_USE_LLAMAFILE -I$G -I$G/ggml-cpu -I$V/ggml/include
  done
  # the score function, built without the variant's flags (ggml_add_cpu_backend_features)
  compile "ggml-cpu-$variant-feats" "$G/ggml-cpu/arch/arm/cpu-feats.cpp" -w "${defs[@]}" \
    -DGGML_BACKEND_DL -DGGML_BACKEND_BUILD -DGGML_BACKEND_SHARED -I$G -I$V/ggml/include
done

# --- ggml-rpc (without GGML_RPC_RDMA: librdma exists from macOS 26.2 on, and the wheel's
# macOS 15 runner has none)
for src in ggml-rpc.cpp transport.cpp; do
  compile ggml-rpc "$G/ggml-rpc/$src" -w "${BACKEND_DEFS[@]}" -I$G -I$V/ggml/include
done

# --- ggml-metal: its C++ files (the two .m files need Foundation and Metal)
for src in ggml-metal.cpp ggml-metal-device.cpp ggml-metal-common.cpp ggml-metal-fusion.cpp \
  ggml-metal-ops.cpp ggml-metal-tuning.cpp; do
  compile ggml-metal "$G/ggml-metal/$src" -w "${BACKEND_DEFS[@]}" -DGGML_METAL_EMBED_LIBRARY \
    -I$G -I$V/ggml/include
done

# --- ggml-metal's embedded library, step by step as ggml/src/ggml-metal/CMakeLists.txt
# (GGML_METAL_EMBED_LIBRARY): per kernel source, its headers and itself concatenated, the
# internal includes dropped, ggml-common.h and ggml-metal-impl.h inlined, then wrapped in
# an .incbin assembly file with _ggml_metallib_<kind>_{start,end}
M=$ROOT/$G/ggml-metal
KINDS=$(sed -n '/^set(METALLIB_KERNEL_SOURCES/,/^)/s|^ *kernels/\(.*\)\.metal$|\1|p' "$M/CMakeLists.txt")
EMBED="$GEN/metal"
mkdir -p "$EMBED"
for kind in $KINDS; do
  src="$M/kernels/$kind.metal"
  headers=("$M/kernels/common.h")
  grep -q '#include "dequantize\.h"' "$src" && headers+=("$M/kernels/dequantize.h")
  grep -q '#include "quantize\.h"' "$src" && headers+=("$M/kernels/quantize.h")
  grep -q '#include "fa_common\.metal"' "$src" && headers+=("$M/kernels/fa_common.metal")
  grep -q '#include "fa_vec_common\.metal"' "$src" && headers+=("$M/kernels/fa_vec_common.metal")
  out="$EMBED/ggml-metal-embed-$kind.metal" tmp="$WORK/embed-$kind"
  cat "${headers[@]}" "$src" >"$tmp.1"
  sed -e '/#include "common.h"/d' -e '/#include "dequantize.h"/d' -e '/#include "quantize.h"/d' \
    -e '/#include "fa_common.metal"/d' -e '/#include "fa_vec_common.metal"/d' \
    -e '/#pragma once/d' <"$tmp.1" >"$tmp.2"
  sed -e "/__embed_ggml-common.h__/r $ROOT/$G/ggml-common.h" -e '/__embed_ggml-common.h__/d' \
    <"$tmp.2" >"$tmp.3"
  sed -e "/#include \"ggml-metal-impl.h\"/r $M/ggml-metal-impl.h" \
    -e '/#include "ggml-metal-impl.h"/d' <"$tmp.3" | put "$out"
  sym=${kind//-/_}
  {
    echo ".section __DATA,__ggml_metallib"
    echo ".globl _ggml_metallib_${sym}_start"
    echo "_ggml_metallib_${sym}_start:"
    echo ".incbin \"$out\""
    echo ".globl _ggml_metallib_${sym}_end"
    echo "_ggml_metallib_${sym}_end:"
  } | put "$EMBED/ggml-metal-embed-$kind.s"
  compile ggml-metal-embed "$EMBED/ggml-metal-embed-$kind.s"
done
wait

# every object a Mach-O arm64 object; the embedded kernels' symbols there, spanning exactly
# the embedded source; each source self-contained (only ggml-common.h may stay #include'd:
# in the #else of GGML_METAL_EMBED_LIBRARY); and the kinds the same as the ones
# ggml-metal-device.m looks for (GGML_METAL_LIBS)
check_errors=0
"$PY" - "$WORK" "$EMBED" "$M/ggml-metal-device.m" $KINDS <<'EOF' || check_errors=1
import re
import struct
import sys
from pathlib import Path

work, embed, device_m = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
kinds = sys.argv[4:]
errors = []


def symbols(path):
    """{name: (section index, value, external)} and [(segment, section, size)] of a Mach-O
    64-bit object."""
    data = path.read_bytes()
    magic, cputype, _, _, ncmds, _, _, _ = struct.unpack_from("<8I", data, 0)
    if magic != 0xFEEDFACF or cputype != 0x0100000C:  # MH_MAGIC_64, CPU_TYPE_ARM64
        raise ValueError(f"not a Mach-O arm64 object (magic {magic:#x}, cpu {cputype:#x})")
    syms, sections, off = {}, [], 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<2I", data, off)
        if cmd == 0x19:  # LC_SEGMENT_64
            nsects = struct.unpack_from("<I", data, off + 64)[0]
            for i in range(nsects):
                s = off + 72 + 80 * i
                name = data[s : s + 16].rstrip(b"\0").decode()
                seg = data[s + 16 : s + 32].rstrip(b"\0").decode()
                sections.append((seg, name, struct.unpack_from("<Q", data, s + 40)[0]))
        elif cmd == 0x2:  # LC_SYMTAB
            symoff, nsyms, stroff, _ = struct.unpack_from("<4I", data, off + 8)
            for i in range(nsyms):
                strx, ntype, nsect, _, value = struct.unpack_from("<IBBHQ", data, symoff + 16 * i)
                end = data.index(b"\0", stroff + strx)
                syms[data[stroff + strx : end].decode()] = (nsect, value, bool(ntype & 1))
        off += size
    return syms, sections


objects = sorted((work / "obj").rglob("*.o"))
for obj in objects:
    try:
        symbols(obj)
    except (ValueError, struct.error) as e:
        errors.append(f"{obj.relative_to(work)}: {e}")

declared = re.findall(r"^\s*X\(\w+,\s*(\w+)\s*\)", device_m.read_text(), re.M)
if sorted(declared) != sorted(k.replace("-", "_") for k in kinds):
    errors.append(f"ggml-metal-device.m's GGML_METAL_LIBS {sorted(declared)} != the CMake kernel list {sorted(kinds)}")

embedded = 0
for kind in kinds:
    sym, src = kind.replace("-", "_"), embed / f"ggml-metal-embed-{kind}.metal"
    obj = work / f"obj/ggml-metal-embed/metal__ggml-metal-embed-{kind}.s.o"
    if not obj.is_file():
        errors.append(f"{obj.name}: not assembled")
        continue
    text = src.read_text()
    left = set(re.findall(r'^\s*#\s*include\s*"([^"]+)"', text, re.M)) - {"ggml-common.h"}
    if left or "__embed_ggml-common.h__" in text:
        errors.append(f"{src.name}: not self-contained (includes {sorted(left)} left)")
    kernel = (device_m.parent / f"kernels/{kind}.metal").read_text()
    if '#include "dequantize.h"' in kernel and "block_q4_0" not in text:
        errors.append(f"{src.name}: ggml-common.h not inlined")
    syms, sections = symbols(obj)
    start, end = syms.get(f"_ggml_metallib_{sym}_start"), syms.get(f"_ggml_metallib_{sym}_end")
    if not (start and end and start[2] and end[2]):
        errors.append(f"{obj.name}: _ggml_metallib_{sym}_start/_end missing or not global")
        continue
    sect = sections[start[0] - 1]
    if sect[:2] != ("__DATA", "__ggml_metallib"):
        errors.append(f"{obj.name}: the symbols are in {sect[0]},{sect[1]}")
    if end[1] - start[1] != src.stat().st_size or sect[2] < src.stat().st_size:
        errors.append(f"{obj.name}: {end[1] - start[1]} bytes between the symbols, the source has {src.stat().st_size}")
    embedded += src.stat().st_size

for e in errors:
    print(f"check_macos: {e}", file=sys.stderr)
print(f"check_macos: {len(objects)} Mach-O arm64 objects; {len(kinds)} Metal kernel sources embedded ({embedded // 1024} KiB)")
sys.exit(1 if errors else 0)
EOF

total=$(wc -l <"$WORK/all.txt")
failed=$(wc -l <"$WORK/failed.txt")
# the bindings' warnings (clang's, for macOS): shown, not fatal (the build has no -Werror)
warnings=$(cat "$WORK"/logs/_core__*.log | grep -c ' warning: ' || true)
if ((warnings > 0)); then
  echo "check_macos: $warnings warnings in _core's sources:"
  cat "$WORK"/logs/_core__*.log | grep ' warning: ' | sort -u | head -20
fi
if ((failed > 0)); then
  while read -r name; do
    echo "=== FAILED: $name"
    grep 'error: ' "$WORK/logs/${name//\//__}.log" | head -20
  done <"$WORK/failed.txt"
fi
# the seconds each part's compiles took, added up
awk '{ split($2, p, "/"); t[p[1]] += $1 } END { for (g in t) printf "%s %.0f s\n", g, t[g] / 1000 }' \
  "$WORK/times.txt" | sort | tr '\n' ';' | sed 's/;$//; s/;/, /g; s/^/check_macos: compile time per part: /'
echo
echo "not compiled here: ggml-metal-device.m, ggml-metal-context.m (Foundation, Metal), ggml-blas"
echo "  (Accelerate), ggml-cpu's GGML_USE_ACCELERATE calls, ggml-rpc's transport-apple.cpp (librdma)"
((macro_errors == 0)) || echo "check_macos: FAIL: $macro_errors CPU variants with other ACLE macros than clang's -march"
((check_errors == 0)) || echo "check_macos: FAIL: the objects' check (above)"
echo "check_macos: took $(($(date +%s) - start)) s"
echo "macOS compile check: $total files compiled, $failed failed"
((failed == 0 && macro_errors == 0 && check_errors == 0))
