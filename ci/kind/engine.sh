#!/usr/bin/env bash
# Builds the Docker Engine unstuck runs its containers on — dockerd and
# docker-proxy — from the Go module proxy, and prints the directory that
# holds them. ci/kind/setup.sh starts that dockerd.
#
#   ci/kind/engine.sh [--version v28.5.2]
#
# Why not Debian's docker.io: its dockerd 20.10 answers Docker API 1.41 at
# most, and the testcontainers crate (0.26, through bollard 0.19) always
# speaks 1.49, which Docker Engine 28.1 and newer accept. 28.5.2 is the
# newest engine the module proxy serves with every dependency a release
# (the moby/moby/v2 betas of engine 29 pin unreleased buildkit and swarmkit
# commits the proxy refuses); it answers API 1.51 and accepts 1.24 and up,
# so Debian's docker CLI (1.41) and kind keep working against it. Debian's
# containerd 1.6 and runc run its containers.
#
# github.com/docker/docker is an "+incompatible" module: it has no go.mod,
# its dependencies are pinned in vendor.mod/vendor.sum, and the module zip
# has no vendor/ tree. So the source is copied out of the module cache,
# vendor.mod becomes go.mod, and the pinned dependencies come from the
# proxy (-mod=mod). No cgo: the graph drivers that need it are left out.
#
# Cached under $UNSTUCK_CACHE (default ~/.cache/unstuck):
#   docker-engine/<version>/bin/{dockerd,docker-proxy}
# published by rename once both are built and report the version, under a
# lock of its own (ci/lib/lock.sh), so two set-ups build it once.
set -euo pipefail

VERSION="${UNSTUCK_DOCKER_ENGINE_VERSION:-v28.5.2}"
CACHE="${UNSTUCK_CACHE:-$HOME/.cache/unstuck}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=ci/lib/lock.sh
source "$HERE/../lib/lock.sh"
# shellcheck source=ci/lib/ticker.sh
source "$HERE/../lib/ticker.sh"

while [ $# -gt 0 ]; do
  case "$1" in
    --version) VERSION="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "engine: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case "$VERSION" in v2[89].*.*) ;; *) echo "engine: --version must be a Docker Engine release v28.x.y or newer, got '$VERSION'" >&2; exit 2 ;; esac

log() { printf '[engine %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'engine: error: %s\n' "$*" >&2; exit 1; }
export GOTOOLCHAIN=local

BIN="$CACHE/docker-engine/$VERSION/bin"

built() {
  [ -x "$BIN/dockerd" ] && [ -x "$BIN/docker-proxy" ] \
    && [[ "$("$BIN/dockerd" --version 2>/dev/null)" == "Docker version ${VERSION#v},"* ]]
}

build() {
  if built; then log "dockerd $VERSION: cached ($BIN)"; return 0; fi
  command -v go >/dev/null || die "Go is not installed; the Docker Engine is built from its Go module"
  command -v jq >/dev/null || die "jq is not installed (apt-get install jq; ci/kind/setup.sh installs it)"
  local module="github.com/docker/docker@$VERSION+incompatible" dir work
  log "dockerd $VERSION: building $module from the Go module proxy"
  dir=$(go mod download -json "$module" | jq -r '.Dir // empty') \
    || die "go mod download $module failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
  [ -f "$dir/vendor.mod" ] || die "$module has no vendor.mod (looked in '$dir')"
  work="$CACHE/docker-engine/$VERSION/src.$$"
  rm -rf "$work" "$BIN.new"; mkdir -p "$work" "$BIN.new"
  # A temporary tree: the module cache is read-only, and go.mod must be
  # vendor.mod for the module's own import paths to resolve.
  cp -r "$dir/." "$work/"
  chmod -R u+w "$work"
  cp "$work/vendor.mod" "$work/go.mod"
  cp "$work/vendor.sum" "$work/go.sum"
  rm -rf "$work/vendor"
  local ldflags="-s -w -X github.com/docker/docker/dockerversion.Version=${VERSION#v}"
  ldflags+=" -X github.com/docker/docker/dockerversion.GitCommit=$VERSION+incompatible"
  ldflags+=" -X github.com/docker/docker/dockerversion.PlatformName=unstuck"
  ( cd "$work" && with_ticker "go build of dockerd $VERSION" "2-4 min cold on 2 cores" \
      env CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath" go build \
        -tags "exclude_graphdriver_btrfs exclude_graphdriver_devicemapper" \
        -ldflags "$ldflags" -o "$BIN.new/dockerd" ./cmd/dockerd \
    && CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath" go build -ldflags "-s -w" \
        -o "$BIN.new/docker-proxy" ./cmd/docker-proxy ) \
    || { rm -rf "$work" "$BIN.new"; die "go build of dockerd $VERSION failed (above)"; }
  rm -rf "$work"
  [[ "$("$BIN.new/dockerd" --version)" == "Docker version ${VERSION#v},"* ]] \
    || die "the built dockerd does not report $VERSION: $("$BIN.new/dockerd" --version)"
  rm -rf "$BIN"; mv "$BIN.new" "$BIN"
  log "dockerd: $("$BIN/dockerd" --version)"
}

with_cache_lock "docker-engine-$VERSION" build
echo "$BIN"
