# shellcheck shell=bash
# Set-up steps that run beside each other and beside the tests, and the
# marks a test waits for. A cold `ci/test.sh` spends most of its set-up in
# CPU-bound builds (two Kubernetes versions, the kind node image, the
# registry, the Rust test build) while the test binaries spend most of
# theirs waiting on Kubernetes (grace periods, back-offs); one after the
# other they took about 65 minutes from nothing. So ci/test.sh runs the
# steps every test needs in two lanes side by side, and the steps only some
# tests need in a third lane at the lowest CPU priority beside the tests;
# ci/run-tests.sh starts a test binary only when the steps it needs are
# done (docs/timing.md has the figures).
#
#   source ci/lib/steps.sh
#   steps_begin                  a directory of marks ($UNSTUCK_CI_STEPS)
#   step_run NAME CMD [ARGS...]  run CMD, its output in NAME.log; mark NAME
#                                done (NAME.rc) with its status and phase
#   step_state NAME              prints done, failed, running or none
#   step_wait NAME               waits until NAME is marked; its status
#   step_log NAME                the file of NAME's output
#   step_announce NAME...        NAMEs will run: tests that need them wait
#   steps_announced              every announced name, one a line
#   lane_start NAME CMD [ARGS]   a lane in the background
#   steps_stop                   stops every lane still running
#
# A lane is a background subshell of step_run calls; its pid is kept in
# lanes.pids so that whoever ends the run can stop it.

steps_begin() {
  if [ -z "${UNSTUCK_CI_STEPS:-}" ] || [ ! -d "$UNSTUCK_CI_STEPS" ]; then
    UNSTUCK_CI_STEPS="$PWD/target/ci-steps"
    rm -rf "$UNSTUCK_CI_STEPS"; mkdir -p "$UNSTUCK_CI_STEPS"
  fi
  export UNSTUCK_CI_STEPS
}

# _step_file NAME: the path of NAME's files without their suffix (a step
# is named as the phase table shows it: "ci/setup.sh --k8s-version v1.37.2").
_step_file() { printf '%s/%s' "$UNSTUCK_CI_STEPS" "$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')"; }

# step_run NAME CMD [ARGS...]: CMD's status. NAME.started is written
# first, so that a test that needs NAME waits for it rather than taking
# a step nobody started for one that is done.
step_run() {
  local name="$1" rc=0 f; shift
  f="$(_step_file "$name")"
  : > "$f.started"
  phase "$name" "$@" >"$f.log" 2>&1 || rc=$?
  echo "$rc" > "$f.rc.tmp"
  mv "$f.rc.tmp" "$f.rc"
  return "$rc"
}

# step_run_after PREV NAME CMD [ARGS...]: step_run, when PREV is done;
# when it failed, NAME is marked failed too (not run), so that nothing
# waits for it for ever.
step_run_after() {
  local prev="$1" name="$2" f; shift 2
  if [ "$(step_state "$prev")" = done ]; then step_run "$name" "$@"; return; fi
  f="$(_step_file "$name")"
  echo "not run: the step before it in its lane ($prev) failed" > "$f.log"
  phase_record "$name" 0 "not run ($prev failed)"
  echo 1 > "$f.rc"
  return 1
}

# step_mark NAME STATUS: marks NAME ended with STATUS (a step run by the
# caller itself, such as run-tests.sh's test build).
step_mark() {
  local f; f="$(_step_file "$1")"
  echo "$2" > "$f.rc.tmp"; mv "$f.rc.tmp" "$f.rc"
}

# step_announce NAME...: the steps a lane will run, marked started before
# the lane begins, so that a test that needs a later step waits for it.
step_announce() {
  local name
  for name in "$@"; do
    : > "$(_step_file "$name").started"
    echo "$name" >> "$UNSTUCK_CI_STEPS/announced"
  done
}

step_state() {
  local f
  [ -n "${UNSTUCK_CI_STEPS:-}" ] || { echo none; return; }
  f="$(_step_file "$1")"
  if [ ! -f "$f.started" ]; then echo none
  elif [ ! -f "$f.rc" ]; then
    # A lane that died (killed, out of memory) marks nothing: its steps
    # are failed once no lane is left to run them.
    if _lanes_alive; then echo running; else echo failed; fi
  elif [ "$(cat "$f.rc")" = 0 ]; then echo done
  else echo failed; fi
}

# step_log NAME: the file NAME's output went to.
step_log() { printf '%s.log' "$(_step_file "$1")"; }

# steps_announced: the name of every step announced, one a line.
steps_announced() {
  [ -f "${UNSTUCK_CI_STEPS:-/nonexistent}/announced" ] && cat "$UNSTUCK_CI_STEPS/announced"
}

step_wait() {
  local name="$1"
  while [ "$(step_state "$name")" = running ]; do sleep 2; done
  [ "$(step_state "$name")" != failed ]
}

# lane_start NAME CMD [ARGS...]: CMD (a function too) in the background,
# in a process group of its own (monitor mode), so that steps_stop reaches
# the builds it started as well.
lane_start() {
  local name="$1"; shift
  set -m
  "$@" &
  echo "$! $name" >> "$UNSTUCK_CI_STEPS/lanes.pids"
  set +m
}

_lanes_alive() {
  local pid name
  [ -f "$UNSTUCK_CI_STEPS/lanes.pids" ] || return 1
  while read -r pid name; do kill -0 "$pid" 2>/dev/null && return 0; done < "$UNSTUCK_CI_STEPS/lanes.pids"
  return 1
}

# steps_stop: a lane still running when the run ends (a failed set-up, an
# interrupt) is stopped with everything it started.
steps_stop() {
  local pid name
  [ -f "${UNSTUCK_CI_STEPS:-/nonexistent}/lanes.pids" ] || return 0
  while read -r pid name; do
    kill -0 "$pid" 2>/dev/null || continue
    echo "[test] stopping the set-up lane '$name'" >&2
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done < "$UNSTUCK_CI_STEPS/lanes.pids"
}
