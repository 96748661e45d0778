# Sourced (not run) by the release scripts: what differs between the shells of the release
# workflow's runners (.github/workflows/release.yml): Linux, macOS (bash 3.2 may run this),
# and Git Bash on Windows, whose paths (/d/a/...) native programs read only as D:/a/...
case "$(uname -s)" in
  Linux) OS=linux ;;
  Darwin) OS=macos ;;
  MINGW* | MSYS* | CYGWIN*) OS=windows ;;
  *)
    echo "$(uname -s): no release build for this system" >&2
    exit 2
    ;;
esac
export OS

# PATH as both bash and native programs (python.exe, cmake) read it
native_path() {
  if [[ $OS == windows ]]; then cygpath -m "$1"; else echo "$1"; fi
}

# A folder as an entry of PATH, which Git Bash splits at ":" (so not C:/...)
path_entry() {
  if [[ $OS == windows ]]; then cygpath -u "$1"; else echo "$1"; fi
}

# The absolute, native path of a folder, made if missing
abs_dir() {
  mkdir -p "$1"
  native_path "$(cd "$1" && pwd)"
}

# The absolute, native path of an existing file
abs_file() {
  native_path "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
}

# A venv's folder of programs
venv_bin() {
  if [[ $OS == windows ]]; then echo "$1/Scripts"; else echo "$1/bin"; fi
}

# "3.11" for an interpreter, nothing for one that does not run (on Windows, python3 can be
# the store's stub, which prints a hint and fails)
python_version() {
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

# The interpreter of Python X.Y on PATH: pythonX.Y, else python3 or python when it is X.Y
python_for() {
  local cand
  for cand in "python$1" python3 python; do
    if command -v "$cand" >/dev/null && [[ "$(python_version "$cand")" == "$1" ]]; then
      echo "$cand"
      return 0
    fi
  done
  echo "no Python $1 on PATH" >&2
  return 1
}

# The Python on PATH: python3, or python where python3 does not run (Windows)
default_python() {
  local cand
  for cand in python3 python; do
    if [[ -n "$(python_version "$cand")" ]]; then
      echo "$cand"
      return 0
    fi
  done
  echo "no Python on PATH" >&2
  return 1
}
