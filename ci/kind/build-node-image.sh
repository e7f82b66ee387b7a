#!/usr/bin/env bash
# Builds the offline kind node image unstuck.local/kind-node:<k8s version>
# from files only (no registry, no `kind build node-image`, which needs one):
#
#   1. kubeadm and kube-proxy built like ci/setup.sh builds the other
#      Kubernetes binaries (same module trick, same version ldflags), crictl
#      and CoreDNS from the Go module proxy
#   2. a Debian bookworm rootfs (debootstrap --variant=minbase, systemd 252,
#      Debian's containerd 1.6 / runc / CNI plugins), cached per package list
#   3. the node files from ci/kind/node-files (entrypoint, systemd units,
#      containerd config, ...), the static CNI conflist ci/kind/cni.conflist,
#      /kind/version
#   4. the control-plane images as tiny rootfs tarballs (`docker import`),
#      named exactly as `kubeadm config images list` names them (etcd with
#      the tag of the etcd actually built), plus pause and the scenario
#      busybox from ci/build-images.sh
#   5. the images preloaded into the rootfs' containerd (namespace k8s.io,
#      pinned) by the rootfs' own containerd run in a chroot, then the whole
#      rootfs imported as ONE image layer
#
#   ci/kind/build-node-image.sh [--k8s-version v1.34.4] [--etcd-version v3.5.21] [--force]
#
# Skips all work when docker already has the image with the same input
# stamp (label io.unstuck.inputs). Writes the build's wall time to
# $UNSTUCK_CACHE/kind/node-<version>/build-seconds.
#
# One build at a time per host, whatever the version (ci/lib/lock.sh):
# versions share the Go tools, the rootfs tar and the etcd and CoreDNS
# component image names, which a build beside it would remove.
set -euo pipefail

K8S_VERSION="${UNSTUCK_K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${UNSTUCK_ETCD_VERSION:-v3.5.21}"
CACHE="${UNSTUCK_CACHE:-$HOME/.cache/unstuck}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --k8s-version) K8S_VERSION="$2"; shift 2 ;;
    --etcd-version) ETCD_VERSION="$2"; shift 2 ;;
    --force) FORCE=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "node-image: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

log() { printf '[node-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'node-image: error: %s\n' "$*" >&2; exit 1; }
T_START=$(date +%s)
step_t0=$T_START
step() { local now; now=$(date +%s); log "step done in $(( now - step_t0 ))s; next: $*"; step_t0=$now; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, mounts)"
docker info >/dev/null 2>&1 || die "docker does not answer; run ci/kind/setup.sh (it starts dockerd)"
for t in debootstrap jq go; do command -v "$t" >/dev/null || die "$t missing; run ci/kind/setup.sh"; done
# shellcheck source=ci/lib/lock.sh
source "$HERE/../lib/lock.sh"
cache_lock kind-node

IMAGE="unstuck.local/kind-node:$K8S_VERSION"
K8S_BIN="$CACHE/k8s/$K8S_VERSION/bin"
ETCD_BIN="$CACHE/etcd/$ETCD_VERSION/bin/etcd"
IMAGES_DIR="$CACHE/images"
KC="$CACHE/kind"
TOOLS="$KC/tools"
NODE_DIR="$KC/node-$K8S_VERSION"
mkdir -p "$TOOLS/bin" "$NODE_DIR"
for f in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  [ -x "$K8S_BIN/$f" ] || die "$K8S_BIN/$f missing; run: bash ci/setup.sh --k8s-version $K8S_VERSION"
done
[ -x "$ETCD_BIN" ] || die "$ETCD_BIN missing; run: bash ci/setup.sh --etcd-version $ETCD_VERSION"
[ -f "$IMAGES_DIR/pause.tar" ] && [ -f "$IMAGES_DIR/busybox.tar" ] || die "$IMAGES_DIR/{pause,busybox}.tar missing; run: bash ci/setup.sh"

export GOTOOLCHAIN=local CGO_ENABLED=0
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"

# --- 1. Go binaries -------------------------------------------------------------
# kubeadm and kube-proxy: a module of our own next to ci/setup.sh's (its
# go.mod is copied, so both resolve the same dependency versions and share
# the Go build cache), with the same version ldflags, so `kubeadm version`,
# kubelet and /kind/version agree.
KB="$KC/k8s-$K8S_VERSION"
build_k8s_extra() {
  if [ -x "$KB/bin/kubeadm" ] && [ -x "$KB/bin/kube-proxy" ]; then return 0; fi
  local src="$CACHE/k8s/$K8S_VERSION/src"
  [ -f "$src/go.mod" ] || die "$src/go.mod missing (made by ci/setup.sh)"
  mkdir -p "$KB/src" "$KB/bin"
  cp "$src/go.mod" "$KB/src/go.mod"; [ -f "$src/go.sum" ] && cp "$src/go.sum" "$KB/src/go.sum"
  sed -i 's#^module .*#module local/unstuck-kind-kubebuild#' "$KB/src/go.mod"
  cat > "$KB/src/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
GO
  ( cd "$KB/src" && GOFLAGS=-mod=mod go mod tidy -e >tidy.log 2>&1 ) || { tail -20 "$KB/src/tidy.log" >&2; die "go mod tidy failed in $KB/src"; }
  local ldflags="-s -w" p c
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  # Both in one go build (the package graph loaded once, the links side by
  # side), into a directory of its own, each renamed into place.
  log "go build kubeadm kube-proxy $K8S_VERSION"
  rm -rf "$KB/bin.new"; mkdir -p "$KB/bin.new"
  ( cd "$KB/src" && GOFLAGS=-mod=mod go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$KB/bin.new/" \
      k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-proxy ) \
    || die "go build of kubeadm and kube-proxy failed"
  for c in kubeadm kube-proxy; do
    [ -x "$KB/bin.new/$c" ] || die "go build made no $c"
    mv "$KB/bin.new/$c" "$KB/bin/$c"
  done
  rmdir "$KB/bin.new"
}
log "kubeadm/kube-proxy $K8S_VERSION"
build_k8s_extra
[ "$("$KB/bin/kubeadm" version -o short)" = "$K8S_VERSION" ] || die "kubeadm reports $("$KB/bin/kubeadm" version -o short), want $K8S_VERSION"

# The exact image list kubeadm will use, with etcd's tag set to the etcd we
# really ship (ClusterConfiguration etcd.local.imageTag, also set in
# ci/kind/kind-config.yaml).
ETCD_TAG="${ETCD_VERSION#v}-0"
cat > "$NODE_DIR/images-config.yaml" <<YAML
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: $K8S_VERSION
etcd:
  local:
    imageTag: "$ETCD_TAG"
YAML
mapfile -t KUBEADM_IMAGES < <("$KB/bin/kubeadm" config images list --config "$NODE_DIR/images-config.yaml" 2>/dev/null)
[ ${#KUBEADM_IMAGES[@]} -ge 6 ] || die "kubeadm config images list gave: ${KUBEADM_IMAGES[*]}"
img_for() { local i; for i in "${KUBEADM_IMAGES[@]}"; do case "$i" in */"$1":*) echo "$i"; return 0 ;; esac; done; die "kubeadm lists no $1 image"; }
COREDNS_IMAGE=$(img_for coredns); COREDNS_VERSION="${COREDNS_IMAGE##*:}"
PAUSE_IMAGE=$(tar -xOf "$IMAGES_DIR/pause.tar" ./index.json | jq -r '.manifests[0].annotations["io.containerd.image.name"] // empty')
[ -n "$PAUSE_IMAGE" ] || die "could not read the image name from $IMAGES_DIR/pause.tar"
log "images: ${KUBEADM_IMAGES[*]} (pause replaced by containerd's sandbox_image $PAUSE_IMAGE)"

build_go_tool() { # build_go_tool NAME MODULE_PATH@VERSION [LDFLAGS]
  local name="$1" pkg="$2" ld="${3:-}"
  local vdir="$TOOLS/${pkg##*@}/$name"
  if [ -x "$vdir/$name" ]; then echo "$vdir/$name"; return 0; fi
  mkdir -p "$vdir"
  log "go install $pkg"
  # Into a directory of its own, renamed into place.
  rm -rf "$vdir.new"
  GOBIN="$vdir.new" GOFLAGS=-trimpath go install -ldflags "-s -w $ld" "$pkg" >&2 || die "go install $pkg failed (Go module proxy reachable?)"
  # go install names the binary after the last path element.
  mv "$vdir.new/$(basename "${pkg%@*}")" "$vdir/$name"
  rmdir "$vdir.new"
  echo "$vdir/$name"
}
CRICTL_VERSION=v1.34.0
CRICTL=$(build_go_tool crictl "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION")
COREDNS=$(build_go_tool coredns "github.com/coredns/coredns@$COREDNS_VERSION" "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION")
[[ "$("$COREDNS" -version)" == *"CoreDNS-${COREDNS_VERSION#v}"* ]] || die "built CoreDNS does not report $COREDNS_VERSION"

# --- stamp: skip everything when the image is current -------------------------
ROOTFS_PKGS="systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,jq,procps,psmisc,containerd,runc,containernetworking-plugins"
INPUTS=$( {
  echo "$K8S_VERSION $ETCD_TAG $PAUSE_IMAGE $CRICTL_VERSION $COREDNS_VERSION $ROOTFS_PKGS"
  sha256sum "$0" "$HERE/cni.conflist" "$K8S_BIN"/* "$KB/bin"/* "$ETCD_BIN" "$CRICTL" "$COREDNS" "$IMAGES_DIR/pause.tar" "$IMAGES_DIR/busybox.tar" | cut -d' ' -f1
  (cd "$HERE/node-files" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
} | sha256sum | cut -c1-16)
if [ "$FORCE" = 0 ] && [ "$(docker image inspect -f '{{index .Config.Labels "io.unstuck.inputs"}}' "$IMAGE" 2>/dev/null)" = "$INPUTS" ]; then
  log "$IMAGE is current (inputs $INPUTS); nothing to do"
  exit 0
fi
tools_secs=$(( $(date +%s) - T_START ))
log "building $IMAGE (inputs $INPUTS; Go tools ready after ${tools_secs}s)"
T_START=$(date +%s)   # the benchmark figure excludes the Go builds above
ROOTFS_CACHED=no

# --- 2. Debian rootfs (cached per package list) --------------------------------
MIRROR="${UNSTUCK_DEBIAN_MIRROR:-}"
if [ -z "$MIRROR" ]; then
  MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  [ -n "$MIRROR" ] || MIRROR=$(sed -n 's/^deb \(http[^ ]*debian\)\/* bookworm .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)
  [ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
fi
ROOTFS_TAR="$KC/rootfs-bookworm-$(echo "$ROOTFS_PKGS" | sha256sum | cut -c1-12).tar"
if [ -f "$ROOTFS_TAR" ]; then ROOTFS_CACHED=yes; else
  step "debootstrap bookworm from $MIRROR"
  d="$KC/work/debootstrap.$$"; rm -rf "$d"; mkdir -p "$d"
  debootstrap --variant=minbase --include="$ROOTFS_PKGS" bookworm "$d" "$MIRROR" >"$KC/work/debootstrap.log" 2>&1 \
    || { tail -20 "$KC/work/debootstrap.log" >&2; die "debootstrap failed (log $KC/work/debootstrap.log); is $MIRROR reachable? set UNSTUCK_DEBIAN_MIRROR to override"; }
  # Trim what a node never reads.
  rm -rf "$d"/usr/share/doc/* "$d"/usr/share/man/* "$d"/usr/share/info/* "$d"/usr/share/locale/* \
         "$d"/var/lib/apt/lists/* "$d"/var/cache/apt/*.bin "$d"/var/cache/debconf/*-old "$d"/var/log/*.log
  tar --numeric-owner -C "$d" -cf "$ROOTFS_TAR.tmp" . && mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  rm -rf "$d"
fi

step "node rootfs"
W="$NODE_DIR/work"
cleanup() {
  # Each line ends in `|| true`: under `set -e` the last command of an &&
  # list that fails ends the trap, and the script, with its status (a
  # finished build exited 1 because its component images were already gone).
  if mountpoint -q "$W/rootfs/proc" 2>/dev/null; then umount -l "$W/rootfs/proc" || true; fi
  if [ -n "${PRELOAD_PID:-}" ]; then kill "$PRELOAD_PID" 2>/dev/null || true; fi
  # Component images are only a step towards the node image.
  if [ -n "${COMPONENT_IMAGES[*]:-}" ]; then docker rmi "${COMPONENT_IMAGES[@]}" >/dev/null 2>&1 || true; fi
  return 0
}
trap cleanup EXIT
rm -rf "$W"; mkdir -p "$W/rootfs" "$W/images"
R="$W/rootfs"
tar --numeric-owner -C "$R" -xf "$ROOTFS_TAR"

# --- 3. node files ------------------------------------------------------------
cp -a "$HERE/node-files/." "$R/"
chmod 0755 "$R/kind" "$R/kind/bin" "$R/usr/local/bin/entrypoint" "$R"/kind/bin/*
sed -i "s#@PAUSE_IMAGE@#$PAUSE_IMAGE#" "$R/etc/containerd/config.toml"
printf '%s' "$K8S_VERSION" > "$R/kind/version"
install -m 0755 "$K8S_BIN/kubelet" "$K8S_BIN/kubectl" "$KB/bin/kubeadm" "$R/usr/bin/"
install -m 0755 "$CRICTL" "$R/usr/local/bin/crictl"
mkdir -p "$R/opt/cni/bin" "$R/etc/cni/net.d" "$R/etc/kubernetes/manifests" "$R/kind/manifests" "$R/var/lib/kubelet"
for p in bridge host-local loopback portmap ptp; do ln -sf "/usr/lib/cni/$p" "$R/opt/cni/bin/$p"; done
install -m 0644 "$HERE/cni.conflist" "$R/etc/cni/net.d/10-unstuck.conflist"
install -m 0644 "$HERE/cni.conflist" "$R/kind/unstuck-cni.conflist"
echo "/etc/cni/net.d/10-unstuck.conflist" > "$R/kind/unstuck-cni.path"
# kind applies this only without networking.disableDefaultCNI; the static
# conflist is already in place, so it is a harmless marker.
cat > "$R/kind/manifests/default-cni.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: unstuck-static-cni
  namespace: kube-system
data:
  path: /etc/cni/net.d/10-unstuck.conflist
  note: the node image ships a static single-node CNI config; no CNI daemon runs
YAML
# kind applies this; without a provisioner it is only a default class.
cat > "$R/kind/manifests/default-storage.yaml" <<'YAML'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
YAML
# The base OCI spec for CRI containers: containerd's default, without its
# RLIMIT_NOFILE=1024 so containers inherit the node's limits (as in kind).
chroot "$R" ctr oci spec | jq 'del(.process.rlimits)' > "$R/etc/containerd/cri-base.json"
[ -s "$R/etc/containerd/cri-base.json" ] || die "could not generate cri-base.json"

# The kind base image's Dockerfile steps, in the chroot.
rm -f "$R"/etc/systemd/system/*.wants/* "$R"/lib/systemd/system/multi-user.target.wants/* \
      "$R"/lib/systemd/system/local-fs.target.wants/* "$R"/lib/systemd/system/basic.target.wants/* \
      "$R"/lib/systemd/system/sockets.target.wants/*udev* "$R"/lib/systemd/system/sockets.target.wants/*initctl* \
      "$R"/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service
grep -qx 'ReadKMsg=no' "$R/etc/systemd/journald.conf" || echo 'ReadKMsg=no' >> "$R/etc/systemd/journald.conf"
ln -sf /lib/systemd/systemd "$R/sbin/init"
chroot "$R" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
chroot "$R" systemctl mask systemd-binfmt.service >/dev/null 2>&1
chroot "$R" systemctl is-enabled kubelet.service containerd.service undo-mount-hacks.service >/dev/null \
  || die "systemctl enable in the chroot failed"
echo "unstuck-kind-node" > "$R/etc/hostname"

# --- 4. component images --------------------------------------------------------
step "component images"
# mkimg NAME:TAG DIR ENTRYPOINT_JSON : one-layer image from DIR
mkimg() {
  local name="$1" dir="$2" ep="$3"
  mkdir -p "$dir/etc" "$dir/tmp" "$dir/var/run" "$dir/proc" "$dir/sys" "$dir/dev"
  chmod 1777 "$dir/tmp"
  echo 'root:x:0:0:root:/root:/sbin/nologin' > "$dir/etc/passwd"
  echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >> "$dir/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$dir/etc/group"
  echo 'hosts: files dns' > "$dir/etc/nsswitch.conf"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir" -c . \
    | docker import --change "ENTRYPOINT $ep" \
        --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'LABEL io.unstuck.built-by=ci/kind/build-node-image.sh' - "$name" >/dev/null \
    || die "docker import $name failed"
  COMPONENT_IMAGES+=("$name")
}
COMPONENT_IMAGES=()
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  d="$W/images/$c"; mkdir -p "$d/usr/local/bin"
  install -m 0755 "$K8S_BIN/$c" "$d/usr/local/bin/$c"
  mkimg "$(img_for "$c")" "$d" "[\"/usr/local/bin/$c\"]"
done
d="$W/images/etcd"; mkdir -p "$d/usr/local/bin" "$d/var/lib/etcd"
install -m 0755 "$ETCD_BIN" "$d/usr/local/bin/etcd"
mkimg "$(img_for etcd)" "$d" '["/usr/local/bin/etcd"]'
d="$W/images/coredns"; mkdir -p "$d"
install -m 0755 "$COREDNS" "$d/coredns"
mkimg "$COREDNS_IMAGE" "$d" '["/coredns"]'

# kube-proxy needs iptables (both backends) and conntrack; take them, their
# libraries and the xtables extensions from the node rootfs so the versions
# match the node's, and pick the backend at first use like upstream's
# iptables-wrapper does.
d="$W/images/kube-proxy"; mkdir -p "$d/usr/local/bin" "$d/usr/sbin" "$d/bin"
install -m 0755 "$KB/bin/kube-proxy" "$d/usr/local/bin/kube-proxy"
copy_libs() { # copy_libs FILE_IN_ROOTFS: the shared libraries FILE needs, into $d
  local lib
  for lib in $(chroot "$R" ldd "$1" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/.*ld-linux/ {print $1}'); do
    if [ -e "$R$lib" ] && [ ! -e "$d$lib" ]; then
      mkdir -p "$d$(dirname "$lib")"; cp -L "$R$lib" "$d$lib"
    fi
  done
}
for b in /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/sbin/conntrack /usr/sbin/nft; do
  [ -e "$R$b" ] || continue
  cp -a "$R$b" "$d$b"
  copy_libs "$b"
done
mkdir -p "$d/usr/lib/x86_64-linux-gnu"; cp -a "$R/usr/lib/x86_64-linux-gnu/xtables" "$d/usr/lib/x86_64-linux-gnu/"
for l in "$d"/usr/lib/x86_64-linux-gnu/xtables/*.so; do copy_libs "${l#"$d"}"; done
[ -d "$R/lib64" ] && { mkdir -p "$d/lib64"; cp -L "$R"/lib64/ld-linux-x86-64.so.2 "$d/lib64/"; }
mkdir -p "$d/etc"; cp -a "$R/etc/ethertypes" "$R/etc/protocols" "$d/etc/" 2>/dev/null || true
cp /bin/busybox "$d/bin/busybox"; ln -s busybox "$d/bin/sh"
cat > "$d/usr/sbin/iptables-wrapper" <<'SH'
#!/bin/sh
# First iptables call in the kube-proxy container: use the backend the node
# uses (kubelet's KUBE-IPTABLES-HINT chain, else whichever has more rules),
# repoint every iptables name at it, and run the original command.
bb=/bin/busybox
mode=nft
if xtables-legacy-multi iptables-save -t mangle 2>/dev/null | $bb grep -q KUBE-IPTABLES-HINT; then mode=legacy
elif ! xtables-nft-multi iptables-save -t mangle 2>/dev/null | $bb grep -q KUBE-IPTABLES-HINT; then
  l=$(xtables-legacy-multi iptables-save 2>/dev/null | $bb grep -c '^-')
  n=$(xtables-nft-multi iptables-save 2>/dev/null | $bb grep -c '^-')
  [ "${l:-0}" -gt "${n:-0}" ] && mode=legacy
fi
for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  $bb ln -sf "xtables-$mode-multi" "/usr/sbin/$c"
done
exec "$0" "$@"
SH
chmod 0755 "$d/usr/sbin/iptables-wrapper"
for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf iptables-wrapper "$d/usr/sbin/$c"
done
mkimg "$(img_for kube-proxy)" "$d" '["/usr/local/bin/kube-proxy"]'

docker save -o "$W/components.tar" "${COMPONENT_IMAGES[@]}" || die "docker save failed"
docker rmi "${COMPONENT_IMAGES[@]}" >/dev/null 2>&1 || true

# --- 5. preload into the rootfs' containerd ------------------------------------
step "preload images into containerd (chroot)"
mount -t proc proc "$R/proc"
mkdir -p "$R/run/preload" "$R/preload"
cp "$W/components.tar" "$IMAGES_DIR/pause.tar" "$IMAGES_DIR/busybox.tar" "$R/preload/"
cat > "$R/run/preload/config.toml" <<'TOML'
version = 2
root = "/var/lib/containerd"
state = "/run/preload/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "/run/preload/containerd.sock"
TOML
chroot "$R" containerd --config /run/preload/config.toml >"$W/preload-containerd.log" 2>&1 &
PRELOAD_PID=$!
for _ in $(seq 1 50); do chroot "$R" ctr -a /run/preload/containerd.sock version >/dev/null 2>&1 && break; sleep 0.2; done
ctr_r() { chroot "$R" ctr -a /run/preload/containerd.sock -n k8s.io "$@"; }
for t in components.tar pause.tar busybox.tar; do
  ctr_r images import --label=io.cri-containerd.pinned=pinned --no-unpack --digests "/preload/$t" >/dev/null \
    || { tail -20 "$W/preload-containerd.log" >&2; die "ctr images import $t failed"; }
done
have=$(ctr_r images ls -q)
for want in "${COMPONENT_IMAGES[@]}" "$PAUSE_IMAGE" unstuck.local/busybox:1.35; do
  case "$want" in */*) ;; *) want="docker.io/library/$want" ;; esac
  grep -qx "$want" <<<"$have" || die "image $want is not in the node's containerd after import (have: $(echo $have))"
done
kill "$PRELOAD_PID"; wait "$PRELOAD_PID" 2>/dev/null || true; PRELOAD_PID=""
umount -l "$R/proc"
rm -rf "$R/preload" "$R/run/preload" "$R/run"/* "$R/tmp"/*

# --- 6. the node image -----------------------------------------------------------
# Written as a one-layer docker-archive and `docker load`ed rather than
# `docker import`ed: dockerd 20.10's import/commit --change rejects
# STOPSIGNAL, and systemd as PID 1 must be stopped with SIGRTMIN+3 (on TERM
# it re-executes itself, so `docker stop`/`restart` would wait 10s and kill).
step "docker load $IMAGE"
A="$W/archive"; mkdir -p "$A"
tar --numeric-owner -C "$R" -cf "$A/layer.tar" .
layer_sha=$(sha256sum "$A/layer.tar" | cut -d' ' -f1)
jq -n --arg diff "sha256:$layer_sha" --arg inputs "$INPUTS" --arg k8s "$K8S_VERSION" --arg created "$(date -u +%Y-%m-%dT%H:%M:%SZ)" '{
  architecture: "amd64", os: "linux", created: $created,
  config: {
    Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "container=docker"],
    Entrypoint: ["/usr/local/bin/entrypoint", "/sbin/init"],
    StopSignal: "SIGRTMIN+3",
    Labels: {
      "io.unstuck.inputs": $inputs,
      "io.unstuck.k8s-version": $k8s,
      "io.unstuck.cni-conflist": "/etc/cni/net.d/10-unstuck.conflist",
      "io.unstuck.built-by": "ci/kind/build-node-image.sh"
    }
  },
  rootfs: {type: "layers", diff_ids: [$diff]},
  history: [{created: $created, created_by: "ci/kind/build-node-image.sh (debootstrap bookworm + node files + preloaded images)"}]
}' > "$A/config.json"
jq -n --arg tag "$IMAGE" '[{Config: "config.json", RepoTags: [$tag], Layers: ["layer.tar"]}]' > "$A/manifest.json"
old_id=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
tar -C "$A" -c manifest.json config.json layer.tar | docker load >/dev/null || die "docker load of the node image failed"
[ "$(docker image inspect -f '{{index .Config.Labels "io.unstuck.inputs"}} {{.Config.StopSignal}}' "$IMAGE")" = "$INPUTS SIGRTMIN+3" ] \
  || die "docker has no $IMAGE with the expected label/stop signal after loading"
# Earlier builds are now untagged; drop every one no container uses (a build
# kept earlier because a cluster was running goes with the next build).
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]; then
  docker rmi "$old_id" >/dev/null 2>&1 || log "kept the previous image $old_id (a container still uses it)"
fi
docker image prune -f --filter "label=io.unstuck.built-by=ci/kind/build-node-image.sh" >/dev/null 2>&1 || true
rm -rf "$W"
secs=$(( $(date +%s) - T_START ))
echo "$secs" > "$NODE_DIR/build-seconds"
# For the benchmark: what this build included.
printf 'image_seconds=%s\nrootfs_cached=%s\ngo_tools_seconds=%s\nimage=%s\ninputs=%s\n' \
  "$secs" "$ROOTFS_CACHED" "$tools_secs" "$IMAGE" "$INPUTS" > "$NODE_DIR/build-info"
log "built $IMAGE in ${secs}s ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
