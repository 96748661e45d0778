#!/usr/bin/env bash
# The container images' base without an image registry: Debian 12 (bookworm) with Debian's
# CPython 3.11 and its venv module, made with debootstrap from Debian's packages and
# imported into podman's store.
#
#   ci/container/base.sh [TAG]         # default: localhost/pyllama-base:bookworm
#   DEBIAN_MIRROR=URL                  # default: the mirror this machine's apt reads bookworm from
#
# Root only (debootstrap chroots, podman imports into root's store). The deploy Containerfiles
# take this image through their BASE build arg (ci/container/check.sh passes it); it is the
# same contract as python:3.11-slim-bookworm, their default: glibc 2.36 for the
# manylinux_2_34 wheel, and a python3 that can make a venv.
set -euo pipefail
TAG=${1:-localhost/pyllama-base:bookworm}
SUITE=bookworm
[[ $(id -u) -eq 0 ]] || { echo "base.sh: run as root (debootstrap, podman's root store)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "base.sh: apt-get install -y podman debootstrap runc" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/container/podman.sh
. "$HERE/podman.sh"
podman_setup

# The mirror: apt's own configuration (one-line sources.list entries or deb822 .sources
# files), so no host name lives in this repository
apt_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    awk -v s="$SUITE" '$1 == "deb" && $0 ~ " " s " " {
      for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    # a stanza (blank-line separated) whose Suites holds exactly "bookworm"
    awk -v s="$SUITE" 'BEGIN { RS = "" } {
      uri = ""; hit = 0
      n = split($0, lines, "\n")
      for (i = 1; i <= n; i++) {
        if (lines[i] ~ /^URIs:/) { split(lines[i], u, /[ \t]+/); uri = u[2] }
        if (lines[i] ~ /^Suites:/) { m = split(lines[i], w, /[ \t]+/); for (j = 2; j <= m; j++) if (w[j] == s) hit = 1 }
      }
      if (hit && uri != "") print uri }' "$f"
  done
}
MIRROR=${DEBIAN_MIRROR:-$(apt_mirror | head -1)}
[[ -n "$MIRROR" ]] || { echo "base.sh: no $SUITE entry in apt's sources; set DEBIAN_MIRROR" >&2; exit 2; }

ROOTFS=$(mktemp -d /var/tmp/pyllama-base.XXXXXX)
trap 'rm -rf "$ROOTFS" "$ROOTFS.log" "$(dirname "$CONTAINERS_CONF")"' EXIT
start=$(date +%s)
# minbase: dpkg, apt and the essential set; python3-venv brings ensurepip's pip wheel, so
# the Containerfile's venv needs no network
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || { tail -20 "$ROOTFS.log" >&2; exit 1; }
rm -f "$ROOTFS.log"
# what an image does not need: the package lists and archives (apt-get update refills
# them) and documentation
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin \
  "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* \
  "$ROOTFS"/usr/share/info/* "$ROOTFS"/var/log/*.log
find "$ROOTFS"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
chroot "$ROOTFS" python3 -c 'import sys, venv, ensurepip; print(sys.version)' >/dev/null

tar --numeric-owner --xattrs -C "$ROOTFS" -c . |
  "${PODMAN[@]}" import --quiet --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    --message "debootstrap $SUITE minbase + python3-venv" - "$TAG" >/dev/null
python=$("${PODMAN[@]}" run --rm --network none "$TAG" python3 -c 'import platform; print(platform.python_version())')
echo "base.sh: $TAG (Debian $(cat "$ROOTFS/etc/debian_version"), Python $python)" \
  "$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1 / 1e6}')" \
  "in $(($(date +%s) - start)) s"
