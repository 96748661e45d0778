#!/usr/bin/env bash
# An arm64 Debian 12 root for cross builds and qemu runs, made of extracted packages
# (apt-get download + dpkg -x): nothing of it is installed, so apt's own amd64 python3.11
# is never replaced. It holds what the aarch64 wheel builds against (Python headers) and
# what qemu-aarch64 -L runs it with (the C/C++ runtime, python3.11 with venv and pip).
#
#   ci/arm64_root.sh [DIR]    (default: $PYLLAMA_CACHE/arm64-root or ~/.cache/pyllama/arm64-root)
# Prints DIR. A second call with the root in place does nothing.
set -euo pipefail
root=$(realpath -m "${1:-${PYLLAMA_CACHE:-$HOME/.cache/pyllama}/arm64-root}")
if [ -f "$root/.complete" ]; then
  echo "$root"
  exit 0
fi
# the cross compiler (with its own libc and libstdc++ for linking) and the emulator
need=()
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
  apt-get update -qq
elif [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
fi
[ ${#need[@]} -eq 0 ] || apt-get install -y -qq "${need[@]}" >/dev/null

packages=(
  libc6 libgcc-s1 libstdc++6 libgomp1
  python3.11 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
  libpython3.11 libpython3.11-dev python3.11-venv
  zlib1g libexpat1 libffi8 libssl3 libbz2-1.0 liblzma5 libsqlite3-0 libuuid1 libcrypt1
  libncursesw6 libtinfo6 libreadline8 libdb5.3 libnsl2 libtirpc3
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
)
shared=(python3-pip-whl python3-setuptools-whl media-types) # architecture: all
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
(cd "$debs" && apt-get download -qq "${packages[@]/%/:arm64}" "${shared[@]}")
rm -rf "$root"
mkdir -p "$root"
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$root"; done
# Debian's headers say #include <aarch64-linux-gnu/python3.11/pyconfig.h>; a compiler
# given only the python3.11 folder needs the real one there
cp "$root/usr/include/aarch64-linux-gnu/python3.11/pyconfig.h" "$root/usr/include/python3.11/pyconfig.h"
touch "$root/.complete"
echo "$root"
