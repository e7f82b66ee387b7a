#!/usr/bin/env bash
# Builds an image of unstuck itself, offline, from files: the `unstuck`
# binary linked statically (crt-static glibc, as the backend image) in a
# `FROM scratch` image, tagged unstuck.local/unstuck:dev in the local
# Docker engine. For the doctor on a machine with Docker and no Rust:
#
#   docker run --rm --network host -v "$HOME/.kube/config:/kubeconfig:ro" \
#     unstuck.local/unstuck:dev doctor --kubeconfig /kubeconfig
#
#   ci/images/unstuck.sh          build if the binary changed
#   UNSTUCK_IMAGE=TAG ci/images/unstuck.sh   another tag
#
# Its cargo target directory lives in the cache (~/.cache/unstuck), not in
# the checkout: a fresh clone then rebuilds only the workspace's own
# crates (measured here: about 3 min; the first build, dependencies
# included, about 9 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=ci/lib/lock.sh
source ci/lib/lock.sh
cache_lock unstuck-image
IMAGE="${UNSTUCK_IMAGE:-unstuck.local/unstuck:dev}"
TARGET=x86_64-unknown-linux-gnu
TARGET_DIR="${UNSTUCK_IMAGE_TARGET_DIR:-$HOME/.cache/unstuck/target-image}"
start=$(date +%s)
RUSTFLAGS='-C target-feature=+crt-static' cargo build --quiet --release --locked \
  -p unstuck --bin unstuck --target "$TARGET" --target-dir "$TARGET_DIR"
bin="$TARGET_DIR/$TARGET/release/unstuck"
digest="$(sha256sum "$bin" | cut -c1-16)"
have="$(docker image inspect --format '{{index .Config.Labels "dev.unstuck.binary"}}' "$IMAGE" 2>/dev/null || true)"
if [ "$have" = "$digest" ]; then
  echo "[unstuck-image] $IMAGE is current ($digest; $(( $(date +%s) - start )) s)" >&2
  exit 0
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cp "$bin" "$work/unstuck"
strip "$work/unstuck" 2>/dev/null || true
# A home and a temp dir for the doctor's backups (`--backup-dir` defaults
# under the working directory): the image has no filesystem of its own.
mkdir -p "$work/rootfs/tmp" "$work/rootfs/work"
chmod 1777 "$work/rootfs/tmp"
cp "$work/unstuck" "$work/rootfs/unstuck"
cat > "$work/rootfs/Dockerfile" <<DOCKERFILE
FROM scratch
COPY unstuck /unstuck
COPY tmp /tmp
COPY work /work
ENV HOME=/work TMPDIR=/tmp
WORKDIR /work
LABEL dev.unstuck.binary="$digest"
ENTRYPOINT ["/unstuck"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build --quiet --tag "$IMAGE" "$work/rootfs" >/dev/null 2>"$work/build.log" || {
  cat "$work/build.log" >&2
  echo "[unstuck-image] docker build failed" >&2
  exit 1
}
echo "[unstuck-image] built $IMAGE ($digest, $(docker image inspect --format '{{.Size}}' "$IMAGE") bytes) in $(( $(date +%s) - start )) s" >&2
