#!/usr/bin/env bash
# End-to-end check of the offline kind node image (run after ci/kind/setup.sh):
# creates a one-node cluster, waits for the node and every kube-system pod,
# runs a busybox pod with an emptyDir, deletes it, checks that nothing was
# ever pulled, deletes the cluster and checks that no container, volume or
# network is left behind. Prints timings.
#
#   ci/kind/smoke.sh [--k8s-version v1.34.4] [--name unstuck-try] [--keep]
set -euo pipefail
K8S_VERSION="${UNSTUCK_K8S_VERSION:-v1.34.4}"
CACHE="${UNSTUCK_CACHE:-$HOME/.cache/unstuck}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME=unstuck-try KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --k8s-version) K8S_VERSION="$2"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "kind-smoke: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
log() { printf '[kind-smoke %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'kind-smoke: FAIL: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }

KIND="$CACHE/kind/kind"
KUBECTL="$CACHE/k8s/$K8S_VERSION/bin/kubectl"
IMAGE="unstuck.local/kind-node:$K8S_VERSION"
[ -x "$KIND" ] || die "$KIND missing; run ci/kind/setup.sh"
[ -x "$KUBECTL" ] || die "$KUBECTL missing; run ci/setup.sh"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "$IMAGE missing; run ci/kind/setup.sh"
export KUBECONFIG="$CACHE/kind/smoke-$NAME.kubeconfig"
k() { "$KUBECTL" "$@"; }
cleanup() { [ "$KEEP" = 1 ] || "$KIND" delete cluster --name "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$KIND" delete cluster --name "$NAME" >/dev/null 2>&1 || true

t0=$(now)
"$KIND" create cluster --name "$NAME" --image "$IMAGE" --config "$HERE/kind-config.yaml" --wait 3m \
  || die "kind create cluster failed (rerun with --retain -v 6 and see 'kind export logs')"
T_CREATE=$(since "$t0")
k wait --for=condition=Ready "node/$NAME-control-plane" --timeout=60s >/dev/null || die "node not Ready"
T_NODE=$(since "$t0")
for app in component=kube-apiserver component=kube-controller-manager component=kube-scheduler component=etcd k8s-app=kube-proxy k8s-app=kube-dns; do
  for _ in $(seq 1 120); do
    [ -n "$(k get pods -n kube-system -l "$app" -o name 2>/dev/null)" ] && break; sleep 0.5
  done
  k wait --for=condition=Ready pod -n kube-system -l "$app" --timeout=120s >/dev/null || die "kube-system pods $app not Ready"
done
T_SYSTEM=$(since "$t0")
log "node Ready after ${T_NODE}s (kind create returned after ${T_CREATE}s); all kube-system pods Ready after ${T_SYSTEM}s"
k get pods -n kube-system -o wide

t1=$(now)
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: smoke, namespace: default}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: c
    image: unstuck.local/busybox:1.35
    command: ["/bin/sh", "-c", "echo ok > /data/f; trap 'exit 0' TERM; while :; do sleep 1; done"]
    volumeMounts: [{name: d, mountPath: /data}]
  volumes: [{name: d, emptyDir: {}}]
YAML
k wait --for=condition=Ready pod/smoke --timeout=60s >/dev/null || die "busybox pod not Ready"
[ "$(k exec smoke -- cat /data/f)" = ok ] || die "emptyDir not writable"
T_POD=$(since "$t1")
t2=$(now)
k delete pod smoke --wait=true --timeout=60s >/dev/null || die "pod deletion did not finish"
k get pod smoke >/dev/null 2>&1 && die "pod still present after delete"
T_PODDEL=$(since "$t2")
log "busybox pod with emptyDir Ready in ${T_POD}s, deleted and gone in ${T_PODDEL}s"

pulls=$(k get events -A -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | grep -c '^Pulling$' || true)
[ "$pulls" = 0 ] || die "$pulls image pull attempt(s) in the events"
node_pulls=$(docker exec "$NAME-control-plane" sh -c 'journalctl -u containerd -u kubelet --no-pager | grep -c -i -E "PullImage|pulling image"' || true)
[ "${node_pulls:-0}" = 0 ] || die "the node's containerd/kubelet logs show $node_pulls pull(s)"
log "no image pull attempt (events and node logs)"

[ "$KEEP" = 1 ] && { log "kept cluster $NAME (KUBECONFIG=$KUBECONFIG)"; trap - EXIT; exit 0; }
t3=$(now)
"$KIND" delete cluster --name "$NAME" || die "kind delete cluster failed"
T_DELETE=$(since "$t3")
trap - EXIT
left=$(docker ps -a --filter "label=io.x-k8s.kind.cluster=$NAME" -q)
[ -z "$left" ] || die "containers left: $left"
vols=$(docker volume ls -q --filter dangling=true)
[ -z "$vols" ] || die "volumes left: $vols"
# kind never removes its shared "kind" network; drop it when no kind node uses it.
if docker network inspect kind >/dev/null 2>&1 && [ -z "$(docker ps -aq --filter label=io.x-k8s.kind.cluster)" ]; then
  docker network rm kind >/dev/null
fi
others=$(docker network ls --format '{{.Name}}' | grep -v -x -E 'bridge|host|none' || true)
if [ -n "$others" ]; then
  log "deleted in ${T_DELETE}s; no container or volume left; networks still present (used by other clusters): $others"
else
  log "deleted in ${T_DELETE}s; no container, volume or network left"
fi
rm -f "$KUBECONFIG"
echo "create=${T_CREATE}s node_ready=${T_NODE}s system_ready=${T_SYSTEM}s pod=${T_POD}s pod_delete=${T_PODDEL}s delete=${T_DELETE}s"
