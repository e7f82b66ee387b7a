#!/usr/bin/env bash
# The main job: set up (fast when cached), build unstuck, run every
# scenario on a throwaway local cluster, tear it down. Exits non-zero if a
# scenario failed.
#
#   sudo ci/main.sh [unstuck run arguments, e.g. --filter orphan]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
bash ci/setup.sh
cargo build --release --quiet -p unstuck
exec target/release/unstuck run "$@"
