#!/usr/bin/env bash
# The body of action.yml (the reusable GitHub Action), usable anywhere: it
# reads its inputs from the environment, writes the result to
# $GITHUB_STEP_SUMMARY and its outputs to $GITHUB_OUTPUT (name=value lines),
# and exits with unstuck's exit code.
#
#   UNSTUCK_ACTION_COMMAND   run | doctor (default run)
#   UNSTUCK_ACTION_ARGS      more arguments, split at spaces
#   UNSTUCK_ACTION_SCENARIOS scenario directory for run (default: this repo's)
#   UNSTUCK_ACTION_OUT       run's output folder (default unstuck-runs)
#   UNSTUCK_ACTION_SETUP     true: ci/setup.sh first (run only; default true)
#   UNSTUCK_BIN              an unstuck binary to use instead of a release
#                            build of this checkout
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
COMMAND="${UNSTUCK_ACTION_COMMAND:-run}"
OUT="${UNSTUCK_ACTION_OUT:-unstuck-runs}"
SCENARIOS="${UNSTUCK_ACTION_SCENARIOS:-$ROOT/scenarios}"
SUMMARY="${GITHUB_STEP_SUMMARY:-/dev/null}"
OUTPUT="${GITHUB_OUTPUT:-/dev/null}"
read -ra ARGS <<<"${UNSTUCK_ACTION_ARGS:-}"

say() { printf '[unstuck-action] %s\n' "$*" >&2; }
fail() { say "error: $*"; echo "exit-code=2" >> "$OUTPUT"; exit 2; }
case "$COMMAND" in run|doctor) ;; *) fail "command must be run or doctor, not '$COMMAND'" ;; esac

# Root for what needs it (a local cluster's processes, mounts and
# cgroups): sudo on a hosted runner, nothing when already root.
AS_ROOT=()
[ "$(id -u)" = 0 ] || AS_ROOT=(sudo -E env "PATH=$PATH" "HOME=$HOME")

BIN="${UNSTUCK_BIN:-}"
if [ -z "$BIN" ]; then
  say "building unstuck (release)"
  (cd "$ROOT" && cargo build --release --locked --quiet -p unstuck) || fail "cargo build failed"
  BIN="$ROOT/target/release/unstuck"
fi
[ -x "$BIN" ] || fail "no unstuck binary at $BIN"

case "$COMMAND" in
  run)
    if [ "${UNSTUCK_ACTION_SETUP:-true}" = true ]; then
      say "setting up the local cluster's components (ci/setup.sh; cached after the first run)"
      "${AS_ROOT[@]}" bash "$ROOT/ci/setup.sh" || fail "ci/setup.sh failed"
    fi
    mkdir -p "$OUT"
    before="$(ls -1 "$OUT")"
    "${AS_ROOT[@]}" "$BIN" run --scenarios "$SCENARIOS" --fixtures "$ROOT/fixtures" --out "$OUT" "${ARGS[@]}"
    rc=$?
    # The run folder this run made (named by its start time).
    run_dir="$(comm -13 <(printf '%s\n' "$before" | sort) <(ls -1 "$OUT" | sort) | tail -1)"
    if [ -n "$run_dir" ] && [ -f "$OUT/$run_dir/summary.md" ]; then
      cat "$OUT/$run_dir/summary.md" >> "$SUMMARY"
      echo "report=$OUT/$run_dir/report.json" >> "$OUTPUT"
      echo "junit=$OUT/$run_dir/junit.xml" >> "$OUTPUT"
    else
      printf '## unstuck: the run wrote no summary (exit %s); see the job log\n' "$rc" >> "$SUMMARY"
    fi
    ;;
  doctor)
    text="$(mktemp)"; trap 'rm -f "$text"' EXIT
    "$BIN" doctor --color never "${ARGS[@]}" >"$text"
    rc=$?
    cat "$text"
    {
      printf '## unstuck doctor (exit %s)\n\n```\n' "$rc"
      cat "$text"
      printf '```\n'
    } >> "$SUMMARY"
    ;;
esac
echo "exit-code=$rc" >> "$OUTPUT"
exit "$rc"
