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
#   UNSTUCK_IMAGE_BINARY=PATH ci/images/unstuck.sh   that binary instead of
#     a static release build (a dynamic one gets its shared libraries and
#     their loader copied beside it): what tests/doctor_image.rs does with
#     the binary the test build made, so CI compiles nothing more for it
#
# The release build's target directory lives in the cache
# (~/.cache/unstuck), not in the checkout: a fresh clone then rebuilds
# only the workspace's own crates. The first build, dependencies
# included, took 11 min here (2 cores, beside a suite run).
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
if [ -n "${UNSTUCK_IMAGE_BINARY:-}" ]; then
  bin="$UNSTUCK_IMAGE_BINARY"
else
  RUSTFLAGS='-C target-feature=+crt-static' cargo build --quiet --release --locked \
    -p unstuck --bin unstuck --target "$TARGET" --target-dir "$TARGET_DIR"
  bin="$TARGET_DIR/$TARGET/release/unstuck"
fi
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
# A dynamic binary: its libraries and loader, at the paths it looks in.
libs=()
while read -r path; do
  [ -n "$path" ] || continue
  mkdir -p "$work/rootfs/$(dirname "$path")"
  cp -L "$path" "$work/rootfs/$path"
  libs+=("$path")
done < <(ldd "$work/unstuck" 2>/dev/null | sed -nE 's/.*=> (\/[^ ]+) .*/\1/p; s/^[[:space:]]*(\/[^ ]+) \(0x.*/\1/p')
copy_libs=""
for d in $(printf '%s\n' "${libs[@]+"${libs[@]}"}" | cut -d/ -f2 | sort -u); do
  copy_libs+="COPY $d /$d"$'\n'
done
cat > "$work/rootfs/Dockerfile" <<DOCKERFILE
FROM scratch
COPY unstuck /unstuck
${copy_libs}COPY tmp /tmp
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
