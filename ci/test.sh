#!/usr/bin/env bash
# The test command: installs and builds what the tests need (fast when
# cached), checks formatting and lints, then runs every test — unit tests,
# loader tests and the integration tests against real local clusters.
#
#   sudo ci/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
# Every phase is timed; ci/run-tests.sh prints the table at the end, just
# before its closing line (ci/lib/phases.sh). A phase that fails prints it
# here and ends the run.
# shellcheck source=ci/lib/phases.sh
source ci/lib/phases.sh
phases_begin
step() { phase "$@" || { rc=$?; phases_table; exit "$rc"; }; }

NEWEST="$(sed -n 's/^pub const NEWEST_K8S_VERSION: &str = "\(v[0-9.]*\)";/\1/p' harness/unstuck/src/components.rs)"
step "ci/setup.sh" bash ci/setup.sh
# The newest supported Kubernetes version too: tests/newest_version.rs runs
# the whole suite on it (a cold build of it adds about 6-11 minutes once).
step "ci/setup.sh --k8s-version $NEWEST" bash ci/setup.sh --k8s-version "$NEWEST"
# Docker, the kind CLI and the offline kind node image: tests/kind_provider.rs
# runs scenarios on kind clusters (a cold image build adds about 5 minutes once).
step "ci/kind/setup.sh" bash ci/kind/setup.sh
# The project's own backend image (a webhook's or an aggregated API's
# backend for the container: scenarios), FROM scratch, offline: measured
# on this shared 2-core machine 49-68 s cold (the static binary, ring
# included), 0.1-0.7 s when current (a 2.9 MB image).
step "ci/images/backend.sh" bash ci/images/backend.sh
# The registry the registry: scenarios pull from (CNCF distribution v3.1.2,
# built from its Go module with this machine's Go, FROM scratch): measured
# here 3 min 54 s cold (the module download and build, on a machine busy
# with a Kubernetes build), 3 s to make the image, under a second when
# current.
step "ci/images/registry.sh" bash ci/images/registry.sh
echo "[test] cargo fmt --check" >&2
step "cargo fmt --check" cargo fmt --all -- --check
echo "[test] cargo clippy" >&2
step "cargo clippy" cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "[test] cargo test (every test binary; the cluster ones side by side)" >&2
# Like `cargo test --workspace --no-fail-fast`, but the binaries that
# bring up clusters run in parallel (ci/run-tests.sh says why and how).
exec bash ci/run-tests.sh "$@"
