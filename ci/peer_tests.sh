#!/usr/bin/env bash
# Run llama.cpp's own llama-server test suite (vendor/llama.cpp/tools/server/tests, pytest,
# non-slow tests only) against BOTH llama-server built from the same vendor tree (the
# baseline) and pyllama-server, with the suite's own small hub models served by a local
# stand-in for the hub, and report pass/fail/skip/error per test file side by side
# (docs/compatibility.md).
#
# usage: ci/peer_tests.sh [--only pyllama|llama-server] [--out FILE] [--workers N]
#                         [--timeout SECONDS] [--port-base P] [--seed-cache DIR]
#                         [--report-only] [-- EXTRA_PYTEST_ARGS...]
#   --only S        run one server only; its results are merged into FILE if FILE already
#                   holds the other server's (so the two sides can be run separately)
#   --out FILE      results JSON (per-test outcome + failure message, both servers)
#                   default: $PEER_RESULTS or ~/.cache/pyllama/peer-results/peer-results.json
#   --workers N     pytest-xdist workers (default $PYTEST_WORKERS or 2; 0 = no xdist).
#                   The suite's conftest gives worker gwK the port 8080+10*K.
#   --timeout S     wall-clock limit of one server's whole run (default 3600)
#   --port-base P   ports P, P+10, ... for the workers instead of the suite's 8080, 8090, ...
#                   (default $PEER_PORT_BASE or 8080), e.g. to run the two sides at once:
#                   ci/peer_tests.sh --only pyllama --port-base 8280 --out B.json &
#   --seed-cache D  start the run's LLAMA_CACHE as a copy of D, a cache another run left
#                   (e.g. $PEER_WORK/llama-server/llama-cache, which the next llama-server run
#                   replaces: copy it first), so that the server downloads only what is
#                   missing there: a diagnostic for a server whose downloads fail, to see the
#                   rest of the suite; by default each run starts from an empty cache
#   --report-only   run nothing: merge the junit files left in PEER_WORK (by an interrupted
#                   or separately run side) into FILE and print the table
#   anything after "--" goes to pytest, e.g.  -- unit/test_tokenize.py  or  -- -k infill
# examples:
#   ci/peer_tests.sh
#   PYLLAMA_SERVER_BIN=/tmp/peer-venv/bin/pyllama-server PEER_PYTHON=/tmp/peer-venv/bin/python \
#       ci/peer_tests.sh --only pyllama -- unit/test_completion.py
# environment:
#   PYLLAMA_SERVER_BIN   pyllama-server to test (default: pyllama-server on PATH)
#   LLAMA_SERVER_BIN     baseline llama-server (default ~/.cache/pyllama/peer/bin/llama-server,
#                        built with ci/build_peer.sh when missing)
#   PEER_PYTHON          python that has the suite's requirements (pytest, pytest-xdist,
#                        requests, openai, ...: tools/server/tests/requirements.txt)
#                        (default: python3)
#   PEER_MODELS_PYTHON   python with the gguf package and numpy that writes the models
#                        (default: PEER_PYTHON when it has them, else python3)
#   PEER_MODELS_SRC      folder holding the real stories260K.gguf (sha256 pinned below)
#                        (default /work/shared/peer-models)
#   PEER_MODELS_CACHE    where the models written from it are kept, each made only when
#                        missing (default ~/.cache/pyllama/peer-models)
#   PEER_WORK            scratch dir (default ~/.cache/pyllama/peer-results/work)
#   PEER_TEST_TIMEOUT    per-test limit in seconds when pytest-timeout is installed (300)
# The models: ci/peer_models.py writes a stand-in for each hub model the non-slow tests
# name (the real stories260K, derived and random models, a LoRA, a projector, test images,
# a preset.ini), and a local stand-in for the hub (tests/helpers/fake_hub.py, plain HTTP
# on a free port, one per run) serves them under the suite's repo and file names:
# HF_ENDPOINT and MODEL_ENDPOINT point the servers (and their children) at it, so both
# servers download them as they would from the hub, from the suite's own arguments. The
# hub file URLs the tests fetch themselves (LoRA, draft model, images) are rewritten to it
# in the run's copy of the suite; since the images the tests have the server fetch are now
# on 127.0.0.1, not the public hub, PYLLAMA_MEDIA_ALLOW_PRIVATE=1 lets pyllama-server fetch
# them (it refuses private addresses by default; llama-server has no such rule and ignores
# the variable). Each server runs on its own copy of the suite (so tmp/
# files and the LLAMA_CACHE of one run cannot leak into the other), and the suite starts
# each server itself (LLAMA_SERVER_BIN_PATH) with its own arguments, unchanged.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${PYLLAMA_CACHE:-$HOME/.cache/pyllama}"
only=""
out="${PEER_RESULTS:-$cache/peer-results/peer-results.json}"
workers="${PYTEST_WORKERS:-2}"
run_timeout=3600
port_base="${PEER_PORT_BASE:-8080}"
report_only=0
seed_cache="${PEER_SEED_CACHE:-}"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --timeout) run_timeout="$2"; shift 2 ;;
    --port-base) port_base="$2"; shift 2 ;;
    --seed-cache) seed_cache="$2"; shift 2 ;;
    --report-only) report_only=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (pytest args go after --)" >&2; exit 2 ;;
  esac
done
case "$only" in ""|pyllama|llama-server) ;; *) echo "--only pyllama|llama-server" >&2; exit 2 ;; esac
if [ -n "$seed_cache" ]; then
  [ -d "$seed_cache" ] || { echo "--seed-cache: $seed_cache is not a folder" >&2; exit 2; }
  seed_cache="$(cd "$seed_cache" && pwd)"
fi

py="${PEER_PYTHON:-python3}"
suite="$root/vendor/llama.cpp/tools/server/tests"
work="${PEER_WORK:-$cache/peer-results/work}"
mkdir -p "$(dirname "$out")" "$work"

report() {  # merge per-server junit files into $out and print the per-file table
  "$py" - "$out" "$root" "$@" <<'EOF'
import datetime, json, os, re, subprocess, sys
import xml.etree.ElementTree as ET
out, root, *pairs = sys.argv[1:]
data = {}
if os.path.exists(out):
    try:
        data = json.load(open(out))
    except ValueError:
        data = {}
data.setdefault("servers", {})
rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
for pair in pairs:
    name, junit, binpath, rc = pair.split("|")
    tests = {}
    try:
        tree = ET.parse(junit)
    except (OSError, ET.ParseError) as e:
        # killed before pytest wrote its junit file: take the outcomes from the -v log
        log = os.path.join(os.path.dirname(junit), "pytest.log")
        print(f"{name}: no junit results ({e}); outcomes from {log}", file=sys.stderr)
        pat = re.compile(r"^(?:\[gw\d+\] \[ *\d+%\] )?(PASSED|FAILED|ERROR|SKIPPED) (\S+::.*?)\s*$")
        for line in (open(log, errors="replace") if os.path.exists(log) else []):
            m = pat.match(line)
            if m:
                oc = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped"}[m[1]]
                prev = tests.get(m[2])
                if prev is None or rank[oc] > rank[prev["outcome"]]:
                    tests[m[2]] = {"outcome": oc, "message": "(from log; no junit)"}
        data["servers"][name] = {"bin": binpath, "pytest_rc": int(rc), "tests": tests,
                                 "date": datetime.date.today().isoformat(), "partial": True}
        continue
    for tc in tree.iter("testcase"):
        cls, nm = tc.get("classname", ""), tc.get("name", "")
        if not nm:
            continue  # placeholder entries of an interrupted run
        parts = cls.split(".")
        # classname "unit.test_basic" (or "unit.test_x.TestClass"); the file is the first test_*
        idx = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        node = "/".join(parts[: idx + 1]) + ".py::" + "::".join(parts[idx + 1:] + [nm])
        outcome, msg = "passed", ""
        for kind in ("error", "failure", "skipped"):
            el = tc.find(kind)
            if el is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind]
                msg = (el.get("message") or "") + "\n" + (el.text or "")[-3000:]
                break
        prev = tests.get(node)
        if prev is None or rank[outcome] > rank[prev["outcome"]]:
            tests[node] = {"outcome": outcome, "message": msg.strip()[:4000]}
    data["servers"][name] = {"bin": binpath, "pytest_rc": int(rc), "tests": tests,
                             "date": datetime.date.today().isoformat()}
try:
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
except OSError:
    commit = ""
data["commit"] = commit
data["date"] = datetime.date.today().isoformat()
json.dump(data, open(out, "w"), indent=1, sort_keys=True)

servers = [s for s in ("llama-server", "pyllama") if s in data["servers"]]
files = sorted({n.split("::")[0] for s in servers for n in data["servers"][s]["tests"]})
def count(s, f=None):
    c = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for n, t in data["servers"][s]["tests"].items():
        if f is None or n.split("::")[0] == f:
            c[t["outcome"]] += 1
    return c
def cell(c):
    tot = sum(c.values())
    return f"{c['passed']}/{tot} (F{c['failed']} E{c['error']} S{c['skipped']})"
print("| test file | " + " | ".join(f"{s} passed/total" for s in servers) + " |")
print("|---|" + "---|" * len(servers))
for f in files:
    print(f"| {f.split('/')[-1]} | " + " | ".join(cell(count(s, f)) for s in servers) + " |")
print("| **total** | " + " | ".join(cell(count(s)) for s in servers) + " |")
if len(servers) == 2:
    a, b = (data["servers"][s]["tests"] for s in servers)
    worse = sorted(n for n in a if a[n]["outcome"] == "passed" and b.get(n, {}).get("outcome") in ("failed", "error"))
    better = sorted(n for n in b if b[n]["outcome"] == "passed" and a.get(n, {}).get("outcome") in ("failed", "error"))
    print(f"\n{len(worse)} tests pass on llama-server but fail/error on pyllama; "
          f"{len(better)} pass on pyllama but fail/error on llama-server.")
print(f"results: {out}")
EOF
}

if [ "$report_only" = 1 ]; then  # (re)merge the junit files a run left in $work
  pairs=()
  for name in llama-server pyllama; do
    if { [ -f "$work/$name/junit.xml" ] || [ -f "$work/$name/pytest.log" ]; } && { [ -z "$only" ] || [ "$only" = "$name" ]; }; then
      pairs+=("$name|$work/$name/junit.xml|$(cat "$work/$name/bin" 2>/dev/null || echo "?")|-1")
    fi
  done
  report "${pairs[@]}"; exit 0
fi

if [ ! -f "$suite/utils.py" ]; then python3 "$root/ci/fetch_vendor.py"; fi
if ! "$py" -c "import pytest, xdist, requests, openai, wget, filelock" 2>/dev/null; then
  echo "$py lacks the suite's requirements: $py -m pip install -r $suite/requirements.txt" >&2
  exit 2
fi

# the real stories260K (tinyllamas, F32): every other model is written from it or at random
STORIES260K_SHA256=270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d
models_src="${PEER_MODELS_SRC:-/work/shared/peer-models}"
models_cache="${PEER_MODELS_CACHE:-$cache/peer-models}"
stories="$models_src/stories260K.gguf"
if [ ! -d "$models_src" ] || [ ! -f "$stories" ]; then
  echo "peer models not found: $stories is missing (the folder $models_src should hold the" >&2
  echo "real stories260K.gguf, 1,185,376 bytes, sha256 $STORIES260K_SHA256; set PEER_MODELS_SRC)" >&2
  exit 2
fi
if [ "$(sha256sum "$stories" | cut -d' ' -f1)" != "$STORIES260K_SHA256" ]; then
  echo "$stories: sha256 is not $STORIES260K_SHA256" >&2; exit 2
fi
models_py="${PEER_MODELS_PYTHON:-}"
if [ -z "$models_py" ]; then
  if "$py" -c "import gguf, numpy" 2>/dev/null; then models_py="$py"; else models_py=python3; fi
fi
hub_args_file="$work/fake-hub.args.$$"
# the fake hub's --serve arguments, one a line; the models are written when missing
"$models_py" "$root/ci/peer_models.py" --cache "$models_cache" --stories "$stories" \
  --sha256 "$STORIES260K_SHA256" >"$hub_args_file" ||
  { rm -f "$hub_args_file"; echo "ci/peer_models.py could not write the models (into $models_cache)" >&2; exit 2; }
mapfile -t hub_args <"$hub_args_file"
rm -f "$hub_args_file"

llama_bin="${LLAMA_SERVER_BIN:-$cache/peer/bin/llama-server}"
pyllama_bin="${PYLLAMA_SERVER_BIN:-pyllama-server}"
if [ "$only" != pyllama ] && [ ! -x "$llama_bin" ]; then
  if [ -z "${LLAMA_SERVER_BIN:-}" ]; then "$root/ci/build_peer.sh" "$cache/peer"; fi
  [ -x "$llama_bin" ] || { echo "baseline not found: $llama_bin" >&2; exit 2; }
fi
if [ "$only" != llama-server ]; then
  command -v "$pyllama_bin" >/dev/null || { echo "pyllama-server not found: $pyllama_bin (set PYLLAMA_SERVER_BIN)" >&2; exit 2; }
  pyllama_bin="$(command -v "$pyllama_bin")"
fi

xdist=()
if [ "$workers" -gt 0 ]; then xdist=(-n "$workers" --dist=worksteal); fi
to=()
if "$py" -c "import pytest_timeout" 2>/dev/null; then to=(--timeout "${PEER_TEST_TIMEOUT:-300}"); fi

hub_pid=""
hub_url=""
start_fake_hub() {  # work-dir: tests/helpers/fake_hub.py serving hub_args; sets hub_pid and hub_url
  local w="$1" i
  # its output goes to a file: run_one's stdout is read by $(...), which would wait for it
  # --cdn-host: LFS files redirect to another host name, as the hub's do (to its file
  # store); llama-server's client sometimes loses one of several parallel downloads on a
  # same-host redirect (tests/helpers/fake_hub.py)
  "$py" "$root/tests/helpers/fake_hub.py" --port 0 --port-file "$w/fake-hub.port" \
    --cdn-host localhost "${hub_args[@]}" </dev/null >"$w/fake-hub.log" 2>&1 &
  hub_pid=$!
  for i in $(seq 1 600); do
    if [ -s "$w/fake-hub.port" ]; then
      hub_url="http://127.0.0.1:$(cat "$w/fake-hub.port")"
      return 0
    fi
    kill -0 "$hub_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "the fake hub did not start (log: $w/fake-hub.log)" >&2
  return 1
}

stop_fake_hub() {
  if [ -n "$hub_pid" ]; then
    kill "$hub_pid" 2>/dev/null || true
    wait "$hub_pid" 2>/dev/null || true
    hub_pid=""
  fi
}

run_one() {  # name real-server-binary -> prints "name|junit|bin|rc"
  local name="$1" bin="$2" w="$work/$1"
  rm -rf "$w"
  # Mirror the layout the tests assume (../../../models/templates, ../../../tools/mtmd).
  mkdir -p "$w/suite/tools/server" "$w/llama-cache"
  if [ -n "$seed_cache" ]; then
    echo "== $name: LLAMA_CACHE starts as a copy of $seed_cache" >&2
    cp -a "$seed_cache/." "$w/llama-cache/"
  fi
  # run_one runs in a subshell ($(...)): these traps stop its fake hub however it ends
  trap stop_fake_hub EXIT
  trap 'exit 130' INT TERM
  start_fake_hub "$w" || exit 2
  cp -r "$suite" "$w/suite/tools/server/tests"
  rm -rf "$w/suite/tools/server/tests/tmp" "$w/suite/tools/server/tests/.pytest_cache"
  mkdir -p "$w/suite/tools/server/tests/tmp"
  if [ "$port_base" != 8080 ]; then  # conftest.py: PORT = 8080 + 10 * worker; utils.py: 8080
    sed -i "s/8080 + worker_num/$port_base + worker_num/" "$w/suite/tools/server/tests/conftest.py"
    grep -q "$port_base + worker_num" "$w/suite/tools/server/tests/conftest.py" ||
      { echo "could not move the suite's ports (conftest.py changed?)" >&2; exit 2; }
  fi
  # the hub's file URLs in the tests (download_file()'s LoRA and draft, the images): this hub
  "$models_py" "$root/ci/peer_models.py" rewrite-urls "$w/suite/tools/server/tests" "$hub_url" ||
    { echo "found no hub URL to rewrite in the suite (its tests changed?)" >&2; exit 2; }
  ln -s "$root/vendor/llama.cpp/models" "$w/suite/models"
  ln -s "$root/vendor/llama.cpp/tools/mtmd" "$w/suite/tools/mtmd"
  for p in $(seq 0 "$(( workers > 0 ? workers - 1 : 0 ))"); do
    port=$((port_base + 10 * p))
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "warning: port $port is already in use; tests on it will fail" >&2
    fi
  done
  echo "$bin" >"$w/bin"
  echo "== $name: $bin  (log: $w/pytest.log)" >&2
  local rc=0
  (cd "$w/suite/tools/server/tests" &&
    LLAMA_SERVER_BIN_PATH="$bin" \
    LLAMA_CACHE="$w/llama-cache" PORT="$port_base" \
    HF_ENDPOINT="$hub_url" MODEL_ENDPOINT="$hub_url" PYLLAMA_MEDIA_ALLOW_PRIVATE=1 \
    timeout -s INT -k 120 "$run_timeout" "$py" -m pytest -m "not slow" -v -p no:cacheprovider \
      "${xdist[@]}" "${to[@]}" --junitxml="$w/junit.xml" -o junit_family=xunit1 \
      "${extra[@]}" >"$w/pytest.log" 2>&1) || rc=$?
  stop_fake_hub
  tail -n 3 "$w/pytest.log" >&2
  echo "$name|$w/junit.xml|$bin|$rc"
}

pairs=()
if [ "$only" != pyllama ]; then pairs+=("$(run_one llama-server "$llama_bin")"); fi
if [ "$only" != llama-server ]; then pairs+=("$(run_one pyllama "$pyllama_bin")"); fi
report "${pairs[@]}"
