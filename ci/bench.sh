#!/usr/bin/env bash
# Benchmarks (separate from the tests): prints measured figures only.
#   sudo ci/bench.sh
#   sudo UNSTUCK_BENCH_SECTIONS=scale ci/bench.sh   # only the doctor at 20k/100k objects
#   sudo UNSTUCK_BENCH_SECTIONS=suite ci/bench.sh   # the whole suite and the five core cases, end to end
#   sudo UNSTUCK_BENCH_SECTIONS=incidents ci/bench.sh   # the public incidents: recovery rate, unsafe remedies
#   sudo UNSTUCK_BENCH_SECTIONS=owners ci/bench.sh   # finalizer owner verdicts over recordings and scenarios: live owners judged Dead (goal 0)
#   sudo UNSTUCK_BENCH_SECTIONS=versions ci/bench.sh   # per Kubernetes version: cold build, boot, suite
#     (UNSTUCK_BENCH_VERSIONS=v1.37.2,v1.34.4 limits it to those)
#   sudo UNSTUCK_BENCH_SECTIONS=kind ci/bench.sh   # kind beside local: create to Ready (ratio), image build cold/warm
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
bash ci/setup.sh
case ",${UNSTUCK_BENCH_SECTIONS:-kind}," in *,kind,*) bash ci/kind/setup.sh ;; esac
exec cargo bench -p unstuck --bench bench
