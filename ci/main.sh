#!/usr/bin/env bash
# The main job: set up (fast when cached), build unstuck, run every
# scenario on a throwaway local cluster, tear it down. Exits non-zero if a
# scenario failed. With `--provider kind` (or UNSTUCK_PROVIDER=kind) it
# also sets up Docker, kind and the offline node image (ci/kind/setup.sh).
#
#   sudo ci/main.sh [unstuck run arguments, e.g. --filter orphan]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
bash ci/setup.sh
provider="${UNSTUCK_PROVIDER:-local}"; version="${UNSTUCK_K8S_VERSION:-}"
args=("$@")
for i in "${!args[@]}"; do
  case "${args[$i]}" in
    --provider) provider="${args[$((i + 1))]:-}" ;;
    --provider=*) provider="${args[$i]#--provider=}" ;;
    --k8s-version) version="${args[$((i + 1))]:-}" ;;
    --k8s-version=*) version="${args[$i]#--k8s-version=}" ;;
  esac
done
if [ "$provider" = kind ]; then
  bash ci/kind/setup.sh ${version:+--k8s-version "$version"}
elif [ -n "$version" ] && [ "${version#*,}" = "$version" ] && [ "$version" != supported ]; then
  bash ci/setup.sh --k8s-version "$version"
fi
# The container: scenarios (a webhook's or an aggregated API's backend beside
# the cluster) need a Docker engine and the project's backend image, on
# either provider: the engine alone (Debian's docker.io, started without
# a service manager) when kind is not wanted.
[ "$provider" = kind ] || bash ci/kind/setup.sh --docker-only
bash ci/images/backend.sh
# The registry: scenarios' registry (CNCF distribution, built from its Go
# module; see ci/images/registry.sh).
bash ci/images/registry.sh
cargo build --release --quiet -p unstuck
exec target/release/unstuck run "$@"
