# shellcheck shell=bash
# The CI run's phase table: what each phase of ci/test.sh took, printed at
# the end so that a run's tail says where its time went (set-up scripts,
# fmt, clippy, the test build, each test binary, the total).
#
#   source ci/lib/phases.sh
#   phases_begin                 start the table (kept if one is running)
#   phase NAME CMD [ARGS...]     run CMD, record its wall seconds under NAME
#   phase_record NAME SECS [NOTE]  record a phase timed elsewhere
#   phases_table                 print the table and the total
#
# The table is a file ($UNSTUCK_CI_PHASES, exported) so that ci/test.sh
# and the ci/run-tests.sh it execs write to the same one; the total runs
# from $UNSTUCK_CI_START, the first phases_begin's time.

# phases_begin: a table of its own unless the calling script has one.
phases_begin() {
  if [ -z "${UNSTUCK_CI_PHASES:-}" ] || [ ! -f "$UNSTUCK_CI_PHASES" ]; then
    mkdir -p target
    UNSTUCK_CI_PHASES="$PWD/target/ci-phases.tsv"
    UNSTUCK_CI_START=$(date +%s)
    : > "$UNSTUCK_CI_PHASES"
  fi
  export UNSTUCK_CI_PHASES UNSTUCK_CI_START
}

# phase_record NAME SECONDS [NOTE]
phase_record() {
  printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >> "$UNSTUCK_CI_PHASES"
}

# phase NAME CMD [ARGS...]: CMD's status; a failed phase is marked so.
# (For commands, not functions: in a `||` list `set -e` is off.)
phase() {
  local name="$1" t0 rc=0; shift
  t0=$(date +%s)
  "$@" || rc=$?
  phase_record "$name" "$(( $(date +%s) - t0 ))" "$([ "$rc" = 0 ] || echo "exit $rc")"
  return "$rc"
}

# phases_table: the table, one phase a line, then the total.
phases_table() {
  local total=$(( $(date +%s) - ${UNSTUCK_CI_START:-$(date +%s)} ))
  echo "---- phases (wall seconds)"
  awk -F'\t' '{ line = sprintf("%-58s %6s", $1, $2); if ($3 != "") line = line "  " $3; print line }' "$UNSTUCK_CI_PHASES"
  printf '%-58s %6s\n' "total" "$total"
}
