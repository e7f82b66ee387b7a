#!/usr/bin/env bash
# Builds unstuck's own backend image offline, from files: the static
# `unstuck-backend` binary (harness/unstuck-backend) in a `FROM scratch`
# image, tagged unstuck.local/backend:dev in the local Docker engine. The
# scenarios with a `container:` step run it as a webhook's or an
# aggregated API's backend (see the README, "Writing a scenario").
#
#   ci/images/backend.sh          build if the binary changed
#   UNSTUCK_BACKEND_REBUILD=1 ci/images/backend.sh   build anyway
#   UNSTUCK_BACKEND_IMAGE=TAG ci/images/backend.sh   another tag (trying
#     this script out leaves the image the scenarios run alone)
#
# No registry is involved: `scratch` is no image to pull, and the binary is
# linked statically against glibc (crt-static, no musl toolchain needed).
#
# Two at once on one host (two CI jobs) build it once: the second waits
# for the first's lock (ci/lib/lock.sh) and then finds the image current.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=ci/lib/lock.sh
source ci/lib/lock.sh
cache_lock backend-image
IMAGE="${UNSTUCK_BACKEND_IMAGE:-unstuck.local/backend:dev}"
TARGET=x86_64-unknown-linux-gnu
# A target dir of its own: crt-static RUSTFLAGS would otherwise throw away
# the workspace's build cache each time.
TARGET_DIR="${UNSTUCK_BACKEND_TARGET_DIR:-target/backend}"
start=$(date +%s)
RUSTFLAGS='-C target-feature=+crt-static' cargo build --quiet --release --locked \
  -p unstuck-backend --target "$TARGET" --target-dir "$TARGET_DIR"
bin="$TARGET_DIR/$TARGET/release/unstuck-backend"
# The image is labelled with the binary's digest: rebuilt only when it changed.
digest="$(sha256sum "$bin" | cut -c1-16)"
have="$(docker image inspect --format '{{index .Config.Labels "dev.unstuck.binary"}}' "$IMAGE" 2>/dev/null || true)"
if [ "$have" = "$digest" ] && [ -z "${UNSTUCK_BACKEND_REBUILD:-}" ]; then
  echo "[backend] $IMAGE is current ($digest; $(( $(date +%s) - start )) s)" >&2
  exit 0
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cp "$bin" "$work/unstuck-backend"
strip "$work/unstuck-backend" 2>/dev/null || true
cat > "$work/Dockerfile" <<DOCKERFILE
FROM scratch
COPY unstuck-backend /unstuck-backend
LABEL dev.unstuck.binary="$digest"
EXPOSE 8443
ENTRYPOINT ["/unstuck-backend"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build --quiet --tag "$IMAGE" "$work" >/dev/null 2>"$work/build.log" || {
  # An engine without the classic builder: the same image by import.
  tar -C "$work" -c unstuck-backend | docker import \
    --change 'ENTRYPOINT ["/unstuck-backend"]' --change 'EXPOSE 8443' \
    --change "LABEL dev.unstuck.binary=$digest" - "$IMAGE" >/dev/null
}
echo "[backend] built $IMAGE ($digest, $(docker image inspect --format '{{.Size}}' "$IMAGE") bytes) in $(( $(date +%s) - start )) s" >&2
