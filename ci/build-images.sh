#!/usr/bin/env bash
# Builds the two container images the local cluster needs from files, with
# no registry and no Docker: an OCI image layout written by hand around
# Debian's static busybox, saved as a tar that `ctr images import` takes.
#
#   registry.k8s.io/pause:3.10            the pod sandbox: sleeps until TERM
#   unstuck.local/busybox:1.35            the test image for scenario pods
#
#   ci/build-images.sh OUT_DIR
set -euo pipefail
OUT="${1:?usage: build-images.sh OUT_DIR}"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || { echo "build-images: $BUSYBOX missing; install busybox-static (ci/setup.sh does)" >&2; exit 1; }
mkdir -p "$OUT"
# One build at a time per host (two set-ups at once): the second waits,
# then finds the stamp current. Each tar is published by rename.
# shellcheck source=ci/lib/lock.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/lock.sh"
cache_lock images
# Rebuild only when busybox itself changed.
stamp="$(sha256sum "$BUSYBOX" | cut -c1-16)-v2"
if [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$stamp" ] && [ -f "$OUT/pause.tar" ] && [ -f "$OUT/busybox.tar" ]; then
  echo "[images] cached in $OUT" >&2; exit 0
fi

sha() { sha256sum "$1" | cut -d' ' -f1; }

# build_image NAME TAR ENTRYPOINT_JSON CMD_JSON
build_image() {
  local name="$1" tar_out="$2" entrypoint="$3" cmd="$4"
  local work; work="$(mktemp -d)"; trap 'rm -rf "$work"' RETURN
  mkdir -p "$work/rootfs/bin" "$work/rootfs/etc" "$work/rootfs/tmp" "$work/rootfs/proc" "$work/rootfs/sys" "$work/rootfs/dev" "$work/layout/blobs/sha256"
  cp "$BUSYBOX" "$work/rootfs/bin/busybox"
  for applet in $("$BUSYBOX" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$work/rootfs/bin/$applet"
  done
  echo 'root:x:0:0:root:/root:/bin/sh' > "$work/rootfs/etc/passwd"
  echo 'root:x:0:' > "$work/rootfs/etc/group"
  chmod 1777 "$work/rootfs/tmp"
  # Reproducible layer: fixed owner, order and mtime.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/rootfs" -cf "$work/layer.tar" .
  local layer_sha layer_size; layer_sha="$(sha "$work/layer.tar")"; layer_size="$(stat -c %s "$work/layer.tar")"
  mv "$work/layer.tar" "$work/layout/blobs/sha256/$layer_sha"
  cat > "$work/config.json" <<JSON
{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Entrypoint":$entrypoint,"Cmd":$cmd,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:$layer_sha"]},"history":[{"created_by":"unstuck ci/build-images.sh (busybox-static)"}]}
JSON
  local config_sha config_size; config_sha="$(sha "$work/config.json")"; config_size="$(stat -c %s "$work/config.json")"
  mv "$work/config.json" "$work/layout/blobs/sha256/$config_sha"
  cat > "$work/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config_sha","size":$config_size},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:$layer_sha","size":$layer_size}]}
JSON
  local manifest_sha manifest_size; manifest_sha="$(sha "$work/manifest.json")"; manifest_size="$(stat -c %s "$work/manifest.json")"
  mv "$work/manifest.json" "$work/layout/blobs/sha256/$manifest_sha"
  cat > "$work/layout/index.json" <<JSON
{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:$manifest_sha","size":$manifest_size,"annotations":{"io.containerd.image.name":"$name","org.opencontainers.image.ref.name":"${name##*:}"},"platform":{"architecture":"amd64","os":"linux"}}]}
JSON
  echo '{"imageLayoutVersion":"1.0.0"}' > "$work/layout/oci-layout"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/layout" -cf "$tar_out.tmp" .
  mv "$tar_out.tmp" "$tar_out"
  echo "[images] built $name -> $tar_out ($(du -h "$tar_out" | cut -f1))" >&2
}

# The sandbox only has to hold the pod's namespaces and exit on TERM.
build_image registry.k8s.io/pause:3.10 "$OUT/pause.tar" '["/bin/sh","-c","trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait; done"]' 'null'
build_image unstuck.local/busybox:1.35 "$OUT/busybox.tar" 'null' '["/bin/sh"]'
echo "$stamp" > "$OUT/.stamp"
