#!/usr/bin/env bash
# Builds the registry image the registry: scenarios run, offline, from the
# Go module of the CNCF distribution project (the registry Docker Hub's
# `registry:3` image ships): a static `registry` binary built with this
# machine's Go from the Go module proxy, in a `FROM scratch` image with
# unstuck's configuration, tagged unstuck.local/registry:dev.
#
#   ci/images/registry.sh          build if the binary or config changed
#   UNSTUCK_REGISTRY_REBUILD=1 ci/images/registry.sh   build anyway
#
# The configuration (registry/config.yml) serves plain HTTP on :5000 and
# allows DELETE (a scenario deletes a tag). Basic auth is off unless the
# container is started with REGISTRY_AUTH=htpasswd (the runner does, for a
# registry step with `auth: required`); its one user is in
# registry/htpasswd (see that file).
#
# Two at once on one host (two CI jobs) build it once: the second waits
# for the first's lock (ci/lib/lock.sh) and then finds it current.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=ci/lib/lock.sh
source ci/lib/lock.sh
cache_lock "registry-image"
export GOTOOLCHAIN=local CGO_ENABLED=0
IMAGE=unstuck.local/registry:dev
MODULE=github.com/distribution/distribution/v3/cmd/registry
VERSION=v3.1.2
CACHE="${UNSTUCK_CACHE:-$HOME/.cache/unstuck}/registry/$VERSION"
start=$(date +%s)
bin="$CACHE/bin/registry"
if [ ! -x "$bin" ]; then
  mkdir -p "$CACHE/bin"
  echo "[registry] go install $MODULE@$VERSION (a cold build takes about 2 minutes)" >&2
  # Into a directory beside the cache, then renamed into place.
  rm -rf "$CACHE/bin.new"
  GOBIN="$CACHE/bin.new" go install -trimpath -ldflags='-s -w' "$MODULE@$VERSION"
  mv "$CACHE/bin.new/registry" "$bin"
  rmdir "$CACHE/bin.new"
fi
# The image is labelled with the digest of what goes in: rebuilt only when
# the binary or a file beside it changed.
digest="$(cat "$bin" ci/images/registry/config.yml ci/images/registry/htpasswd | sha256sum | cut -c1-16)"
have="$(docker image inspect --format '{{index .Config.Labels "dev.unstuck.binary"}}' "$IMAGE" 2>/dev/null || true)"
if [ "$have" = "$digest" ] && [ -z "${UNSTUCK_REGISTRY_REBUILD:-}" ]; then
  echo "[registry] $IMAGE is current ($digest; $(( $(date +%s) - start )) s)" >&2
  exit 0
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/etc/distribution" "$work/auth" "$work/var/lib/registry"
cp "$bin" "$work/registry"
cp ci/images/registry/config.yml "$work/etc/distribution/config.yml"
grep -v '^#' ci/images/registry/htpasswd > "$work/auth/htpasswd"
cat > "$work/Dockerfile" <<DOCKERFILE
FROM scratch
COPY registry /registry
COPY etc /etc
COPY auth /auth
COPY var /var
LABEL dev.unstuck.binary="$digest"
EXPOSE 5000
ENTRYPOINT ["/registry"]
CMD ["serve", "/etc/distribution/config.yml"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build --quiet --tag "$IMAGE" "$work" >/dev/null 2>"$work/build.log" || {
  # An engine without the classic builder: the same image by import.
  rm "$work/Dockerfile" "$work/build.log"
  tar -C "$work" -c . | docker import \
    --change 'ENTRYPOINT ["/registry"]' --change 'CMD ["serve", "/etc/distribution/config.yml"]' \
    --change 'EXPOSE 5000' --change "LABEL dev.unstuck.binary=$digest" - "$IMAGE" >/dev/null
}
echo "[registry] built $IMAGE ($digest, $(docker image inspect --format '{{.Size}}' "$IMAGE") bytes) in $(( $(date +%s) - start )) s" >&2
