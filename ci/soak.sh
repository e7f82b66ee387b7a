#!/usr/bin/env bash
# Runs the whole suite N times in a row (default 10) on fresh throwaway
# clusters and counts the runs that passed: the check that the suite is
# not flaky. Each run's reports stay in unstuck-soak/<n>/.
#
#   sudo ci/soak.sh [N] [unstuck run arguments...]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
N="${1:-10}"; shift || true
bash ci/setup.sh >/dev/null 2>&1 || { echo "soak: ci/setup.sh failed; run it alone to see why" >&2; exit 2; }
cargo build --release --quiet -p unstuck || exit 2
rm -rf unstuck-soak; mkdir -p unstuck-soak
passed=0
for i in $(seq 1 "$N"); do
  start=$(date +%s)
  if target/release/unstuck run --out "unstuck-soak/$i" "$@" >"unstuck-soak/$i.log" 2>&1; then
    passed=$((passed + 1)); verdict=pass
  else
    verdict="FAIL (unstuck-soak/$i.log)"
  fi
  echo "run $i of $N: $verdict in $(( $(date +%s) - start )) s; $(grep -E '^[0-9]+ passed, [0-9]+ failed' "unstuck-soak/$i.log" | tail -1)"
done
echo "$passed of $N runs passed"
[ "$passed" -eq "$N" ]
