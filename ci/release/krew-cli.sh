#!/usr/bin/env bash
# Builds the krew CLI (sigs.k8s.io/krew) from its Go module with this
# machine's Go, into $UNSTUCK_CACHE/krew/<version>/bin/krew: what
# tests/krew_plugin.rs installs `kubectl unstuck` with, from the files
# ci/release/krew.sh makes. Nothing is downloaded but Go modules.
#
#   ci/release/krew-cli.sh [--krew-version v0.4.3]
set -euo pipefail
KREW_VERSION="${UNSTUCK_KREW_VERSION:-v0.4.3}"
CACHE="${UNSTUCK_CACHE:-$HOME/.cache/unstuck}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=ci/lib/lock.sh
source "$HERE/lib/lock.sh"
while [ $# -gt 0 ]; do
  case "$1" in
    --krew-version) KREW_VERSION="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "krew-cli: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
command -v go >/dev/null || { echo "krew-cli: Go is not installed (the krew CLI is built from its Go module)" >&2; exit 1; }
DIR="$CACHE/krew/$KREW_VERSION/bin"
build() {
  if [ -x "$DIR/krew" ]; then echo "[krew-cli] $KREW_VERSION: cached in $DIR" >&2; return 0; fi
  local start new; start=$(date +%s); new="$DIR.new"
  rm -rf "$new"; mkdir -p "$new"
  GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$new" GOFLAGS=-mod=mod \
    go install -trimpath -ldflags "-s -w" "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION"
  [ -x "$new/krew" ] || { echo "krew-cli: go install made no krew" >&2; exit 1; }
  rm -rf "$DIR"; mv "$new" "$DIR"
  echo "[krew-cli] $KREW_VERSION: built in $(( $(date +%s) - start )) s" >&2
}
if [ -x "$DIR/krew" ]; then echo "[krew-cli] $KREW_VERSION: cached in $DIR" >&2; else with_cache_lock "krew-$KREW_VERSION" build; fi
