#!/bin/sh
# cgroup v2 only: kubelet's cgroupRoot (/kubelet, kubelet.slice with the
# systemd driver) must exist with every controller enabled.
set -eu
for d in /sys/fs/cgroup/kubelet /sys/fs/cgroup/kubelet.slice; do
  mkdir -p "$d"
  sed -e 's/ / +/g' -e 's/^/+/' < /sys/fs/cgroup/cgroup.controllers > "$d/cgroup.subtree_control" 2>/dev/null || true
done
