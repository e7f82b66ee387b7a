#!/usr/bin/env bash
# Installs everything the local cluster provider needs on a fresh Debian
# machine, as root: Debian packages (containerd, runc, CNI plugins, ...),
# Kubernetes and etcd built from their Go modules with the machine's Go,
# and the two container images built from files. Idempotent: every step
# checks its own stamp, so a warm machine finishes in seconds.
#
#   ci/setup.sh [--k8s-version v1.34.4] [--etcd-version v3.5.21]
#
# Caches live outside the repository, keyed by version:
#   $UNSTUCK_CACHE (default ~/.cache/unstuck)/k8s/<version>/bin/
#   $UNSTUCK_CACHE/etcd/<version>/bin/etcd
#   $UNSTUCK_CACHE/images/*.tar
#
# Two set-ups may run at once on one host (two CI jobs): each cache is
# built under a lock of its own (ci/lib/lock.sh), so the second waits for
# the first's build and then finds it done, and is published by rename.
set -euo pipefail

K8S_VERSION="${UNSTUCK_K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${UNSTUCK_ETCD_VERSION:-v3.5.21}"
CACHE="${UNSTUCK_CACHE:-$HOME/.cache/unstuck}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=ci/lib/lock.sh
source "$HERE/lib/lock.sh"
# shellcheck source=ci/lib/ticker.sh
source "$HERE/lib/ticker.sh"

while [ $# -gt 0 ]; do
  case "$1" in
    --k8s-version) K8S_VERSION="$2"; shift 2 ;;
    --etcd-version) ETCD_VERSION="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "setup: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and builds into $CACHE); try: sudo $0"
command -v go >/dev/null || die "Go is not installed; install Go >= 1.24 (the machine's Go builds Kubernetes)"
case "$K8S_VERSION" in v1.*.*) ;; *) die "--k8s-version must look like v1.34.4, got '$K8S_VERSION'" ;; esac

# --- 1. Debian packages -------------------------------------------------------
PACKAGES=(containerd runc containernetworking-plugins iptables busybox-static conntrack iproute2 util-linux mount e2fsprogs psmisc)
missing_packages() {
  local p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
install_packages() {
  # Asked again under the lock: the holder before us may have installed them.
  local missing
  mapfile -t missing < <(missing_packages)
  [ ${#missing[@]} -gt 0 ] || return 0
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's containerd package starts a daemon on the default socket where
  # a service manager exists; the harness runs its own per cluster.
}
# The lock is apt's own too (ci/kind/setup.sh takes it): a second apt-get
# beside a running one fails on dpkg's lock rather than waiting.
if [ -n "$(missing_packages)" ]; then with_cache_lock apt install_packages; fi

# --- 1b. Kernel limits for several clusters side by side ---------------------
# Every kubelet, containerd and control plane opens inotify instances; the
# kernel's default of 128 per user runs out at about four clusters, and a
# kubelet then exits with "inotify_init: too many open files". Isolated
# scenarios and the parallel tests run more than that. (kind documents the
# same limits for the same reason.)
raise_sysctl() {
  local key="$1" want="$2" have
  have=$(sysctl -n "$key" 2>/dev/null || echo 0)
  if [ "$have" -lt "$want" ]; then
    log "raising $key from $have to $want"
    sysctl -qw "$key=$want" || die "could not set $key=$want (needed for several local clusters at once)"
  fi
  mkdir -p /etc/sysctl.d
  grep -qx "$key = $want" /etc/sysctl.d/60-unstuck.conf 2>/dev/null \
    || echo "$key = $want" >> /etc/sysctl.d/60-unstuck.conf
}
raise_sysctls() {
  raise_sysctl fs.inotify.max_user_instances 1024
  raise_sysctl fs.inotify.max_user_watches 524288
}
# Locked: two set-ups appending to the same file would write a key twice.
with_cache_lock sysctl raise_sysctls

# --- 2. Kubernetes from its Go modules ---------------------------------------
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod"

K8S_DIR="$CACHE/k8s/$K8S_VERSION"
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
k8s_built() { for c in "${K8S_CMDS[@]}"; do [ -x "$K8S_DIR/bin/$c" ] || return 1; done; }

build_k8s() {
  # Asked again under the lock: the holder before us may have built it.
  if k8s_built; then log "kubernetes $K8S_VERSION: cached in $K8S_DIR/bin"; return 0; fi
  local start minor staging_version W gomod_path go_line godebug_line ldflags p c new
  start=$(date +%s)
  log "kubernetes $K8S_VERSION: building ${K8S_CMDS[*]} from Go modules (a cold build takes about 6 minutes on 2 cores)"
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  staging_version="v0.${K8S_VERSION#v1.}"
  W="$K8S_DIR/src"; mkdir -p "$W"
  cd "$W"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them
  # with replace directives that do not travel with the module; route each
  # one to its published tag instead. The list comes from the tag's own
  # go.mod so it is right for any version.
  gomod_path=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$gomod_path" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION from the Go module proxy (is the version right?)"
  go_line=$(grep -m1 '^go ' "$gomod_path")
  godebug_line=$(grep -m1 '^godebug ' "$gomod_path" || true)
  {
    echo "module local/unstuck-kubebuild"
    echo
    echo "$go_line"
    [ -n "$godebug_line" ] && echo "$godebug_line"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod_path" \
      | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } > go.mod
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "${K8S_CMDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } > tools.go
  log "kubernetes $K8S_VERSION: resolving modules"
  with_ticker "go mod tidy of kubernetes $K8S_VERSION (module downloads)" "1-3 min cold" \
    go mod tidy -e >tidy.log 2>&1 || { tail -20 tidy.log >&2; die "go mod tidy failed for kubernetes $K8S_VERSION (log: $W/tidy.log)"; }
  # Stripped (-s -w: no symbol table, no DWARF) and without file paths.
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  # All five in ONE go build: the package graph is loaded and the shared
  # packages compiled once, and the links run side by side (five builds
  # load the graph five times, and link one after the other). Into a
  # directory of its own, renamed into place when every binary is there.
  new="$K8S_DIR/bin.new"
  rm -rf "$new"; mkdir -p "$new"
  log "kubernetes $K8S_VERSION: go build ${K8S_CMDS[*]}"
  with_ticker "go build of kubernetes $K8S_VERSION" "6-11 min cold on 2 cores" \
    go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$new/" \
    "${K8S_CMDS[@]/#/k8s.io/kubernetes/cmd/}" \
    || die "go build of kubernetes $K8S_VERSION failed"
  for c in "${K8S_CMDS[@]}"; do [ -x "$new/$c" ] || die "go build made no $c"; done
  rm -rf "$K8S_DIR/bin"
  mv "$new" "$K8S_DIR/bin"
  log "kubernetes $K8S_VERSION: built in $(( $(date +%s) - start ))s ($(du -sh "$K8S_DIR/bin" | cut -f1))"
  # Kept for the benchmark's cold set-up figure.
  echo "$(( $(date +%s) - start ))" > "$K8S_DIR/build-seconds"
}
if k8s_built; then
  log "kubernetes $K8S_VERSION: cached in $K8S_DIR/bin"
else
  with_cache_lock "k8s-$K8S_VERSION" build_k8s
fi

# --- 3. etcd from its Go module ---------------------------------------------
ETCD_DIR="$CACHE/etcd/$ETCD_VERSION"
build_etcd() {
  if [ -x "$ETCD_DIR/bin/etcd" ]; then log "etcd $ETCD_VERSION: cached in $ETCD_DIR/bin"; return 0; fi
  local start; start=$(date +%s)
  log "etcd $ETCD_VERSION: building from Go modules"
  mkdir -p "$ETCD_DIR/src" "$ETCD_DIR/bin"; cd "$ETCD_DIR/src"
  # A module of its own, so etcd's grpc/otel versions are not unified with
  # Kubernetes'. server/v3 is the etcd main package.
  cat > go.mod <<GOMOD
module local/unstuck-etcdbuild

go 1.23

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go mod tidy -e >tidy.log 2>&1 || { tail -20 tidy.log >&2; die "go mod tidy failed for etcd $ETCD_VERSION"; }
  with_ticker "go build of etcd $ETCD_VERSION" "1-2 min cold" \
    go build -trimpath -ldflags "-s -w" -o "$ETCD_DIR/bin/etcd.tmp" go.etcd.io/etcd/server/v3 || die "go build of etcd failed"
  mv "$ETCD_DIR/bin/etcd.tmp" "$ETCD_DIR/bin/etcd"
  log "etcd $ETCD_VERSION: built in $(( $(date +%s) - start ))s ($(du -h "$ETCD_DIR/bin/etcd" | cut -f1))"
  echo "$(( $(date +%s) - start ))" > "$ETCD_DIR/build-seconds"
}
if [ -x "$ETCD_DIR/bin/etcd" ]; then
  log "etcd $ETCD_VERSION: cached in $ETCD_DIR/bin"
else
  with_cache_lock "etcd-$ETCD_VERSION" build_etcd
fi

# --- 4. images from files ----------------------------------------------------
"$HERE/build-images.sh" "$CACHE/images"

log "ready: kubernetes $K8S_VERSION, etcd $ETCD_VERSION (cache $CACHE)"
