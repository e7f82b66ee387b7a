#!/usr/bin/env bash
# Packages `kubectl unstuck` for krew: the plugin archive and its manifest
# (krew.googlecontainertools.github.com/v1alpha2 Plugin), with the
# archive's sha256 in it, so that
#
#   kubectl krew install --manifest=OUT/unstuck.yaml --archive=OUT/kubectl-unstuck-VERSION-linux-amd64.tar.gz
#
# installs it from files, and the same manifest serves a krew index once
# the archive is published at URI_BASE.
#
#   ci/release/krew.sh OUT [VERSION] [URI_BASE]
#     VERSION   default: v<the crate's version>
#     URI_BASE  where the archive will be published (default: a GitHub
#               release of $UNSTUCK_REPO, default unstuck/unstuck)
#   KUBECTL_UNSTUCK_BIN=PATH   the binary to package (default: a release
#               build of this checkout, statically linked like the image's)
#
# tests/krew_plugin.rs installs what this makes with the krew CLI
# (ci/release/krew-cli.sh builds it offline) and runs `kubectl unstuck`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:?usage: ci/release/krew.sh OUT [VERSION] [URI_BASE]}"
CRATE_VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)"
VERSION="${2:-v$CRATE_VERSION}"
URI_BASE="${3:-https://github.com/${UNSTUCK_REPO:-unstuck/unstuck}/releases/download/$VERSION}"
case "$VERSION" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "krew: VERSION must look like v0.1.0 (krew wants semver), got '$VERSION'" >&2; exit 2 ;; esac

BIN="${KUBECTL_UNSTUCK_BIN:-}"
if [ -z "$BIN" ]; then
  RUSTFLAGS='-C target-feature=+crt-static' cargo build --quiet --release --locked \
    -p unstuck --bin kubectl-unstuck --target x86_64-unknown-linux-gnu --target-dir "$ROOT/target/release-static"
  BIN="$ROOT/target/release-static/x86_64-unknown-linux-gnu/release/kubectl-unstuck"
fi
[ -x "$BIN" ] || { echo "krew: no binary at $BIN" >&2; exit 1; }

mkdir -p "$OUT"
ARCHIVE="kubectl-unstuck-$VERSION-linux-amd64.tar.gz"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
install -m 0755 "$BIN" "$work/kubectl-unstuck"
# Reproducible: fixed owner, time and order, so the sha256 depends on the
# binary alone.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -cf - kubectl-unstuck \
  | gzip -n > "$OUT/$ARCHIVE"
SHA="$(sha256sum "$OUT/$ARCHIVE" | cut -d' ' -f1)"

cat > "$OUT/unstuck.yaml" <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: unstuck
spec:
  version: $VERSION
  homepage: https://github.com/${UNSTUCK_REPO:-unstuck/unstuck}
  shortDescription: Find why objects are stuck in Terminating, and free them
  description: |
    unstuck doctor reads your current context and says what holds each
    object stuck in Terminating: a finalizer whose owner is gone, a dead
    APIService or webhook, a CRD conversion webhook, a pod on a broken
    node. It changes nothing unless asked (--apply), shows its plan first,
    backs up what it changes, and acts only on positive proof that an
    owner is dead.
  caveats: |
    Dry run by default:  kubectl unstuck doctor -n NAMESPACE
    To act on the plan:  kubectl unstuck doctor -n NAMESPACE --apply
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: $URI_BASE/$ARCHIVE
    sha256: $SHA
    bin: kubectl-unstuck
    files:
    - from: kubectl-unstuck
      to: .
YAML
echo "[krew] $OUT/unstuck.yaml and $OUT/$ARCHIVE (sha256 $SHA)" >&2
