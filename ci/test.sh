#!/usr/bin/env bash
# The test command: installs and builds what the tests need (fast when
# cached), checks formatting and lints, then runs every test — unit tests,
# loader tests and the integration tests against real local clusters.
#
#   sudo ci/test.sh [extra cargo test args]
#
# From nothing most of the time is set-up: builds that keep both cores
# busy. So the set-up runs in lanes (ci/lib/steps.sh): what every cluster
# test needs in two lanes beside the Rust test build, and what only some
# tests need (the newest Kubernetes version, the kind node image) and
# clippy in a third, at the lowest CPU priority, beside the tests; a test
# binary starts when the steps it needs are done (ci/run-tests.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
# Every phase is timed; ci/run-tests.sh prints the table at the end, just
# before its closing line (ci/lib/phases.sh). A phase that fails prints it
# here and ends the run.
# shellcheck source=ci/lib/phases.sh
source ci/lib/phases.sh
# shellcheck source=ci/lib/steps.sh
source ci/lib/steps.sh
phases_begin
steps_begin
# Until run-tests.sh takes over (it has the same trap): a failure or an
# interrupt here stops the lanes with everything they started.
trap 'steps_stop' EXIT
trap 'exit 130' INT TERM

NEWEST="$(sed -n 's/^pub const NEWEST_K8S_VERSION: &str = "\(v[0-9.]*\)";/\1/p' harness/unstuck/src/components.rs)"
[ -n "$NEWEST" ] || { echo "test: no NEWEST_K8S_VERSION in harness/unstuck/src/components.rs" >&2; exit 2; }

echo "[test] cargo fmt --check" >&2
phase "cargo fmt --check" cargo fmt --all -- --check || { phases_table; exit 1; }

# Lane 1: packages, Kubernetes (the default version), etcd and the pod
# images: every local cluster needs them.
# (A lane goes on past a failed step: `set +e` in each, as errexit would
# end it before it marked the steps after.)
lane_cluster() { set +e; step_run "ci/setup.sh" bash ci/setup.sh; }
# Lane 2: the Docker engine, then the images the container: and registry:
# scenarios run — the project's backend (49-68 s cold) and the registry
# (about 4 min cold, a Go build); then the krew CLI.
lane_images() {
  set +e
  step_run "ci/kind/setup.sh --docker-only" bash ci/kind/setup.sh --docker-only
  step_run_after "ci/kind/setup.sh --docker-only" "ci/images/backend.sh" bash ci/images/backend.sh
  step_run_after "ci/kind/setup.sh --docker-only" "ci/images/registry.sh" bash ci/images/registry.sh
  # The krew CLI, for tests/krew_plugin.rs (a Go build, about a minute cold).
  step_run "ci/release/krew-cli.sh" bash ci/release/krew-cli.sh
}
# Lane 3, at the lowest priority (a build there takes only the CPU the
# clusters leave): the newest supported Kubernetes version, which only
# tests/newest_version.rs needs (a cold build adds 6-11 minutes once);
# the kind CLI and the offline node image, which only the kind tests need
# (about 5 minutes cold; they run last anyway); clippy, which no test
# waits for (after the test build). Each goes on when one before it failed: they are
# independent, and each failure is reported.
lane_later() {
  set +e
  step_run "ci/setup.sh --k8s-version $NEWEST" nice -n 19 bash ci/setup.sh --k8s-version "$NEWEST"
  step_run "ci/kind/setup.sh" nice -n 19 bash ci/kind/setup.sh
  # After the test build: both lock target/, and the tests wait for that one.
  step_wait "cargo test --no-run"
  step_run "cargo clippy" nice -n 19 cargo clippy --workspace --all-targets --quiet -- -D warnings
}
echo "[test] set-up in three lanes (logs in $UNSTUCK_CI_STEPS/); the test build beside them" >&2
# Every step is announced before any lane starts: a test that needs one
# waits for it even before its lane reaches it.
step_announce "ci/setup.sh" "ci/kind/setup.sh --docker-only" "ci/images/backend.sh" \
  "ci/images/registry.sh" "ci/setup.sh --k8s-version $NEWEST" "ci/kind/setup.sh" "cargo clippy" \
  "cargo test --no-run" "ci/release/krew-cli.sh"
lane_start cluster lane_cluster
lane_start images lane_images
lane_start later lane_later

echo "[test] cargo test (every test binary; the cluster ones side by side, each when its set-up is done)" >&2
# Like `cargo test --workspace --no-fail-fast`, but the binaries that
# bring up clusters run in parallel (ci/run-tests.sh says why and how).
trap - EXIT INT TERM
exec bash ci/run-tests.sh "$@"
