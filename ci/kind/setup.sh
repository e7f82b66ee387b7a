#!/usr/bin/env bash
# Prepares a fresh Debian bookworm machine (as root) for the `kind` cluster
# provider, with no internet beyond Debian's mirror and the Go module proxy:
#
#   1. Debian packages: docker.io (the docker CLI; its dockerd 20.10 is not
#      used), containerd, runc, debootstrap, jq, ...
#   2. a runc wrapper for dockerd, only if the host's capability bounding set
#      lacks CAP_SYS_RESOURCE (see ci/kind/runc-wrapper.sh and docs/kind.md)
#   2b. dockerd v28.5.2 built from its Go module by ci/kind/engine.sh (the
#      testcontainers crate needs Docker API 1.49; Debian's answers 1.41)
#   3. that dockerd, started in the background (no systemd needed), with no
#      docker0 bridge, no IP forwarding and a dead-end proxy so it can never
#      reach a registry
#   4. the kind CLI (sigs.k8s.io/kind) built from the Go module proxy
#   5. the offline node image unstuck.local/kind-node:<k8s version>, built from
#      files by ci/kind/build-node-image.sh (only if docker does not have it
#      or its inputs changed)
#
#   ci/kind/setup.sh [--k8s-version v1.34.4] [--kind-version v0.30.0] [--no-image]
#
# Needs the Kubernetes/etcd binaries and images ci/setup.sh builds; it runs
# ci/setup.sh itself when they are missing. Idempotent and stamped: a warm
# run finishes in seconds. Caches, under $UNSTUCK_CACHE (default
# ~/.cache/unstuck):
#   kind/<kind version>/bin/kind        the kind CLI
#   kind/docker/                        daemon.json, dockerd.log, dockerd.pid
#   kind/tools/, kind/k8s-<version>/    crictl, CoreDNS; kubeadm, kube-proxy
#   kind/rootfs-bookworm-<hash>.tar     the debootstrapped rootfs
#   kind/node-<k8s version>/            rootfs, images, stamp, build-seconds
#
# Two set-ups may run at once on one host (two CI jobs): every step that
# builds or starts something does it under a lock of its own
# (ci/lib/lock.sh), so the second waits and then finds it done.
set -euo pipefail

K8S_VERSION="${UNSTUCK_K8S_VERSION:-v1.34.4}"
KIND_VERSION="${UNSTUCK_KIND_VERSION:-v0.30.0}"
CACHE="${UNSTUCK_CACHE:-$HOME/.cache/unstuck}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=ci/lib/lock.sh
source "$HERE/../lib/lock.sh"
BUILD_IMAGE=1
DOCKER_ONLY=0

while [ $# -gt 0 ]; do
  case "$1" in
    --k8s-version) K8S_VERSION="$2"; shift 2 ;;
    --kind-version) KIND_VERSION="$2"; shift 2 ;;
    --no-image) BUILD_IMAGE=0; shift ;;
    --docker-only) DOCKER_ONLY=1; shift ;;  # steps 1-3: the engine the container: scenarios need
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "kind-setup: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

log() { printf '[kind-setup %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'kind-setup: error: %s\n' "$*" >&2; exit 1; }
TIMINGS=()
timed() { # timed NAME CMD... : runs CMD, records its duration
  local name="$1" t0 rc=0; shift; t0=$(date +%s)
  "$@" || rc=$?
  TIMINGS+=("$name $(( $(date +%s) - t0 ))s")
  return $rc
}

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts dockerd); try: sudo $0"
command -v go >/dev/null || die "Go is not installed; install Go >= 1.24 (kind, crictl and CoreDNS are built from Go modules)"
case "$K8S_VERSION" in v1.*.*) ;; *) die "--k8s-version must look like v1.34.4, got '$K8S_VERSION'" ;; esac
export GOTOOLCHAIN=local
KIND_CACHE="$CACHE/kind"
mkdir -p "$KIND_CACHE"

# --- 1. Debian packages -------------------------------------------------------
install_packages() {
  local pkgs=(docker.io debootstrap jq iptables procps util-linux busybox-static containerd runc) missing=() p
  # A Docker engine that already answers (a CI runner's own) is used as it
  # is: installing Debian's docker.io beside another engine's packages
  # would conflict with them.
  if docker info >/dev/null 2>&1; then pkgs=(debootstrap jq iptables procps util-linux busybox-static); fi
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "packages: installed"; return 0; fi
  log "packages: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Installing docker.io must not start a daemon through a service manager;
  # without systemd there is none, and this script starts its own below.
  apt-get update -qq || die "apt-get update failed; is the Debian mirror in /etc/apt/sources.list* reachable?"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}
# apt's lock as ci/setup.sh takes it: a second apt-get fails on dpkg's.
timed packages with_cache_lock apt install_packages

# --- 2. runtime wrapper (only where the host needs it) -----------------------
DOCKER_DIR="$KIND_CACHE/docker"
mkdir -p "$DOCKER_DIR"
WRAPPER=/usr/local/libexec/unstuck/unstuck-runc
need_wrapper() {
  # CAP_SYS_RESOURCE is bit 24 of the bounding set.
  local bnd; bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  [ $(( (0x$bnd >> 24) & 1 )) -eq 0 ]
}
RUNTIME_JSON=""
if need_wrapper; then
  if ! cmp -s "$HERE/runc-wrapper.sh" "$WRAPPER" 2>/dev/null; then
    log "runtime wrapper: this host's capability bounding set lacks CAP_SYS_RESOURCE; installing $WRAPPER"
    # Renamed into place: a dockerd may be running it right now.
    install -D -m 0755 "$HERE/runc-wrapper.sh" "$WRAPPER.new.$$"
    mv "$WRAPPER.new.$$" "$WRAPPER"
  else
    log "runtime wrapper: installed ($WRAPPER)"
  fi
  RUNTIME_JSON=$(printf ',\n  "runtimes": {"unstuck-runc": {"path": "%s"}},\n  "default-runtime": "unstuck-runc"' "$WRAPPER")
else
  log "runtime wrapper: not needed (CAP_SYS_RESOURCE is in the bounding set)"
fi

# --- 2b. the Docker Engine, built from its Go module --------------------------
# The engine's API: the containers beside a cluster go through the
# testcontainers crate (bollard 0.19), which speaks 1.49 and nothing older.
API_NEEDED=1.49
api_at_least() { # api_at_least HAVE WANT: 1.51 >= 1.49
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]
}
ENGINE_VERSION="${UNSTUCK_DOCKER_ENGINE_VERSION:-v28.5.2}"
ENGINE_BIN=""
build_engine() { ENGINE_BIN=$("$HERE/engine.sh" --version "$ENGINE_VERSION"); }
if docker info >/dev/null 2>&1 \
   && api_ok=$(docker version --format '{{.Server.APIVersion}}' 2>/dev/null) \
   && api_at_least "$api_ok" "$API_NEEDED"; then
  log "engine: the running one answers API $api_ok; no build needed"
else
  timed engine build_engine
fi

# --- 3. dockerd ----------------------------------------------------------------
# Our own config file, so /etc/docker is left alone:
#   bridge none      no docker0; kind creates its own "kind" bridge network
#   ip-forward false the host never routes container traffic elsewhere
#   iptables false   no NAT/masquerade rules on the host (published ports go
#                    through docker-proxy on 127.0.0.1)
#   dns 127.0.0.1    the embedded DNS of user networks never forwards to the
#                    host's (external) resolver
DAEMON_JSON="$DOCKER_DIR/daemon.json"
cat > "$DAEMON_JSON.new.$$" <<JSON
{
  "bridge": "none",
  "ip-forward": false,
  "iptables": false,
  "ip6tables": false,
  "ip-masq": false,
  "dns": ["127.0.0.1"],
  "storage-driver": "overlay2",
  "log-driver": "json-file",
  "log-opts": {"max-size": "20m", "max-file": "2"},
  "pidfile": "$DOCKER_DIR/dockerd.pid",
  "features": {"buildkit": false}$RUNTIME_JSON
}
JSON
mv "$DAEMON_JSON.new.$$" "$DAEMON_JSON"

# stop_our_old_dockerd: an engine that answers an older API is replaced
# only when it is the one this script started (its pid file); any other
# is somebody else's.
stop_our_old_dockerd() {
  local api="$1" pid
  pid=$(cat "$DOCKER_DIR/dockerd.pid" 2>/dev/null || true)
  if [ -z "$pid" ] || ! tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--config-file $DAEMON_JSON"; then
    die "the Docker engine answering on the default socket speaks API $api; unstuck's containers need $API_NEEDED or newer (Docker Engine 28.1+, testcontainers' bollard). It was not started by this script, so it is left alone: upgrade it, or stop it and rerun this script, which builds and starts dockerd $ENGINE_VERSION"
  fi
  log "dockerd: the running engine (pid $pid, API $api) is this script's older one; stopping it to start $ENGINE_VERSION"
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) did not stop within 30s"
  return 0
}

start_dockerd() {
  if docker info >/dev/null 2>&1; then
    local api; api=$(docker version --format '{{.Server.APIVersion}}' 2>/dev/null || echo 0)
    if api_at_least "$api" "$API_NEEDED"; then
      log "dockerd: already answering on the default socket (API $api); leaving it as it is"
      if need_wrapper && [ "$(docker info --format '{{.DefaultRuntime}}')" != unstuck-runc ]; then
        log "dockerd: WARNING: the running daemon's default runtime is not unstuck-runc; on this host 'docker run --privileged' (and so kind) will fail with 'unable to apply caps'. Stop that dockerd and rerun this script, or add the runtime from $DAEMON_JSON to its config."
      fi
      return 0
    fi
    stop_our_old_dockerd "$api"
  fi
  # The engine that answered in step 2b may have stopped since: then no
  # build was made, and there is nothing to start without one.
  [ -n "$ENGINE_BIN" ] || timed engine build_engine
  mkdir -p /lib/modules   # kind mounts it read-only into every node
  log "dockerd: starting $ENGINE_BIN/dockerd (config $DAEMON_JSON, log $DOCKER_DIR/dockerd.log)"
  # A dead-end proxy: any registry access dockerd might attempt (a pull of a
  # missing image) fails at once on loopback instead of leaving the machine.
  # Without the set-up's lock fds: dockerd outlives this script. Its own
  # directory first on PATH: dockerd runs the docker-proxy beside it.
  without_cache_locks env \
    PATH="$ENGINE_BIN:$PATH" \
    HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
    http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 no_proxy= \
    nohup setsid "$ENGINE_BIN/dockerd" --config-file "$DAEMON_JSON" >>"$DOCKER_DIR/dockerd.log" 2>&1 </dev/null &
  local i
  for i in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { tail -20 "$DOCKER_DIR/dockerd.log" >&2; die "dockerd did not answer within 30s (log: $DOCKER_DIR/dockerd.log)"; }
  log "dockerd: running ($(docker version --format '{{.Server.Version}}, API {{.Server.APIVersion}}'), pid $(cat "$DOCKER_DIR/dockerd.pid" 2>/dev/null))"
}
# Locked: two set-ups finding no engine would start two dockerds.
timed dockerd with_cache_lock dockerd start_dockerd
if [ "$DOCKER_ONLY" = 1 ]; then log "done (docker only): ${TIMINGS[*]}"; exit 0; fi

# --- 4. kind CLI ----------------------------------------------------------------
KIND_BIN="$KIND_CACHE/$KIND_VERSION/bin/kind"
build_kind() {
  if [ -x "$KIND_BIN" ] && [[ "$("$KIND_BIN" version 2>/dev/null)" == "kind $KIND_VERSION "* ]]; then
    log "kind $KIND_VERSION: cached ($KIND_BIN)"; return 0
  fi
  log "kind $KIND_VERSION: building sigs.k8s.io/kind from the Go module proxy"
  local new="$KIND_CACHE/$KIND_VERSION/bin.new"
  rm -rf "$new"; mkdir -p "$KIND_CACHE/$KIND_VERSION/bin"
  # `go install pkg@version` builds in module mode without touching any
  # go.mod; into a directory of its own, renamed into place once checked.
  GOBIN="$new" CGO_ENABLED=0 GOFLAGS=-trimpath \
    go install -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION" \
    || die "go install sigs.k8s.io/kind@$KIND_VERSION failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
  [[ "$("$new/kind" version)" == "kind $KIND_VERSION "* ]] || die "built kind does not report $KIND_VERSION: $("$new/kind" version)"
  mv "$new/kind" "$KIND_BIN"; rmdir "$new"
  log "kind: $("$KIND_BIN" version)"
}
link_kind() {
  build_kind
  # ln -sf is an unlink and a symlink: a second one between them fails.
  ln -sfn "$KIND_BIN" "$KIND_CACHE/kind.new.$$"
  mv -T "$KIND_CACHE/kind.new.$$" "$KIND_CACHE/kind"
}
timed kind with_cache_lock "kind-cli-$KIND_VERSION" link_kind

# --- 5. node image --------------------------------------------------------------
if [ "$BUILD_IMAGE" = 1 ]; then
  if [ ! -x "$CACHE/k8s/$K8S_VERSION/bin/kubelet" ] || [ ! -f "$CACHE/images/busybox.tar" ]; then
    log "Kubernetes $K8S_VERSION binaries or images missing; running ci/setup.sh first"
    timed ci-setup "$HERE/../setup.sh" --k8s-version "$K8S_VERSION"
  fi
  timed node-image "$HERE/build-node-image.sh" --k8s-version "$K8S_VERSION"
fi

log "timings: ${TIMINGS[*]}"
log "ready: kind $KIND_VERSION at $KIND_CACHE/kind, image unstuck.local/kind-node:$K8S_VERSION"
log "try: $KIND_CACHE/kind create cluster --name try --image unstuck.local/kind-node:$K8S_VERSION --config $HERE/kind-config.yaml --wait 3m"
