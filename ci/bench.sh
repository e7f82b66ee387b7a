#!/usr/bin/env bash
# Benchmarks (separate from the tests): prints measured figures only.
#   sudo ci/bench.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
bash ci/setup.sh
exec cargo bench -p unstuck --bench bench
