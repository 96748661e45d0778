# shellcheck shell=bash
# Sourced by ci/container/*.sh: podman as root inside a VM whose runtime cannot raise limits.
#
# What this machine (Debian 12, podman 4.3, a VM without CAP_SYS_RESOURCE and with cgroup
# v1 beside a v2 hierarchy holding hugetlb) needs, found by trying:
# - runc, not crun: crun 1.8 refuses the hybrid cgroup layout ("cgroups in hybrid mode not
#   supported, drop all controllers from cgroupv2") even with --cgroups=disabled.
# - ulimits within the hard limits podman's own processes hold: podman asks for
#   nofile/nproc 1048576 by default, and setrlimit above the hard limit needs
#   CAP_SYS_RESOURCE ("setrlimit RLIMIT_NOFILE: Operation not permitted"). conmon ran with
#   nproc 32768 while this shell had 96365, so nproc is a fixed, modest value.
# - cgroupfs and file events: there is no systemd to ask.
# Native overlay works here (ext4); CONTAINERS_STORAGE_DRIVER may pick vfs elsewhere.
# The settings go in a containers.conf of our own (CONTAINERS_CONF replaces the system's),
# so `podman build` RUN steps get them too.
podman_setup() {
  local conf_dir nofile
  conf_dir=$(mktemp -d /tmp/pyllama-podman.XXXXXX)
  nofile=$(ulimit -Hn)
  [[ $nofile == unlimited || $nofile -gt 65536 ]] && nofile=65536
  cat >"$conf_dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=16384:16384"]

[engine]
runtime = "${PODMAN_RUNTIME:-runc}"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  export CONTAINERS_CONF=$conf_dir/containers.conf
  # PODMAN: the command line the sourcing scripts run podman with
  # shellcheck disable=SC2034
  if [[ -n "${CONTAINERS_STORAGE_DRIVER:-}" ]]; then
    PODMAN=(podman --storage-driver "$CONTAINERS_STORAGE_DRIVER")
  else
    PODMAN=(podman)
  fi
  command -v "${PODMAN_RUNTIME:-runc}" >/dev/null || {
    echo "podman.sh: apt-get install -y podman debootstrap runc" >&2
    return 2
  }
}
