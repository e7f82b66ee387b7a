#!/usr/bin/env bash
# Runs every test binary of the workspace, the ones that bring up real
# clusters side by side: most of their time is Kubernetes waiting (grace
# periods, back-offs), not CPU, and each test names its clusters after
# its own process, so they do not meet. `cargo test` would run the
# binaries one after the other (~20 min); this is what nextest does, in
# a few lines of bash, with cargo test's own output per binary.
#
#   ci/run-tests.sh [--jobs N] [test binary args...]
# Prints every binary's output when it ends, then the phase table (the
# test build, each binary, the total; with ci/test.sh's set-up, fmt and
# clippy before them), then one closing line "N passed, N failed" over
# all binaries; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=ci/lib/phases.sh
source ci/lib/phases.sh
# shellcheck source=ci/lib/steps.sh
source ci/lib/steps.sh
phases_begin
# Under ci/test.sh the set-up lanes run beside this script (their marks
# in $UNSTUCK_CI_STEPS); alone, there are none and nothing waits.
# However this script ends, a lane still running is stopped with it.
trap 'steps_stop' EXIT
trap 'exit 130' INT TERM

# Three binaries at once, and each keeps its own fan-out small (the
# scenarios' clusters of their own two at a time, node_faults three
# tests at a time): at four binaries, with up to sixteen clusters on 2
# cores, one namespace controller pass took two minutes and namespace
# scenarios timed out (CI of 2026-11-24, reproduced with the
# controller-manager's own log: a pass started 16:43:03, ended 16:45:00).
JOBS="${UNSTUCK_TEST_JOBS:-3}"
if [ "${1:-}" = "--jobs" ]; then JOBS="$2"; shift 2; fi

LOGS="target/test-logs"
rm -rf "$LOGS"; mkdir -p "$LOGS"

# Build every test binary once and learn where cargo put each.
build_rc=0
phase "cargo test --no-run (the test build)" \
  cargo test --workspace --no-run --message-format=json 2>"$LOGS/build.err" >"$LOGS/build.json" || build_rc=$?
[ -z "${UNSTUCK_CI_STEPS:-}" ] || step_mark "cargo test --no-run" "$build_rc"
[ "$build_rc" = 0 ] || {
  cat "$LOGS/build.err" >&2; phases_table; echo "0 passed, 1 failed (the tests did not build)"; exit 101; }
# "<executable> <crate directory>" per test binary.
grep '"reason":"compiler-artifact"' "$LOGS/build.json" | grep '"profile":{[^}]*"test":true' \
  | sed -nE 's/.*"manifest_path":"([^"]*)\/Cargo.toml".*"executable":"([^"]*)".*/\2 \1/p' \
  | sort -u > "$LOGS/binaries"
mapfile -t BINS < <(cut -d' ' -f1 "$LOGS/binaries")
[ ${#BINS[@]} -gt 0 ] || { echo "0 passed, 1 failed (no test binary found)"; exit 101; }

# Slowest first, so the long ones do not start last; the rest by name.
# Figures are from a measured run on 2 cores (README: test times).
weight() {
  case "$(basename "$1" | sed 's/-[0-9a-f]\{16\}$//')" in
    existing_cluster) echo 900 ;; newest_version) echo 850 ;; kind_provider) echo 820 ;; scenarios) echo 800 ;; node_faults) echo 700 ;;
    owner_liveness) echo 320 ;; fault_cleanup|install) echo 300 ;; suite_isolation) echo 250 ;; namespace_stall) echo 200 ;; kernel_stall|frozen_cgroup) echo 150 ;;
    vac_protection) echo 110 ;; node_consent) echo 180 ;; webhook_backends) echo 100 ;; backend_containers) echo 150 ;; registry_containers) echo 100 ;; doctor_snapshot) echo 60 ;;
    local_cluster) echo 120 ;; cluster_cli) echo 110 ;; github_action|interrupted_boot) echo 100 ;; doctor_cli) echo 100 ;; doctor_chain|doctor_streaming_list|webhook_gate) echo 40 ;; killed_runs) echo 170 ;; pods_not_starting|rbac_blind_spots|conversion_webhook) echo 90 ;;
    *) echo 0 ;;
  esac
}
mapfile -t ORDER < <(for b in "${BINS[@]}"; do echo "$(weight "$b") $b"; done | sort -k1,1nr -k2 | cut -d' ' -f2)

# A binary too slow for one job runs as two, side by side: the first
# with a name filter, the second with `--skip` of that filter, so that
# together they run every test exactly once. existing_cluster runs the
# API-level suite in two halves, each in a test named shard_N_of_2 (its
# whole suite alone took 8-9 minutes of a 27-minute CI run). Not when
# the caller gives test arguments of their own (a filter of theirs and
# ours would be OR-ed by libtest).
split_filter() {
  [ "$SPLIT" = 1 ] || return 0
  case "$(basename "$1" | sed 's/-[0-9a-f]\{16\}$//')" in
    existing_cluster) echo shard_1_of_2 ;;
  esac
}
SPLIT=1; [ $# -eq 0 ] || SPLIT=0
# Jobs: "BINARY PART" with PART 0 (the whole binary), 1 or 2 (its halves).
JOBS_LIST=()
for b in "${ORDER[@]}"; do
  if [ -n "$(split_filter "$b")" ]; then JOBS_LIST+=("$b 1" "$b 2"); else JOBS_LIST+=("$b 0"); fi
done
# A job's name: the binary's, with [1/2] or [2/2] for a half.
job_name() { local name; name="$(basename "$1")"; if [ "$2" = 0 ]; then echo "$name"; else echo "$name [$2/2]"; fi; }
job_log() { local name; name="$(basename "$1")"; if [ "$2" = 0 ]; then echo "$LOGS/$name.log"; else echo "$LOGS/$name.part$2.log"; fi; }

# Binaries that bring up several kind clusters at once (a whole control
# plane in Docker each) run after the others, alone: beside the local
# clusters of the other binaries they starved those control planes on 2
# cores (a CI run of 2026-11-24: two local scenarios timed out at a load
# of 30).
# cluster_cli makes two kind clusters at once (a kept and a held one),
# and two more beside two local ones (four `cluster up` at once).
is_late() { case "$(basename "$1")" in kind_provider-*|cluster_cli-*) return 0 ;; esac; return 1; }
EARLY=(); LATE=()
for j in "${JOBS_LIST[@]}"; do if is_late "${j% *}"; then LATE+=("$j"); else EARLY+=("$j"); fi; done

# The set-up steps a binary needs before it starts (ci/test.sh's lanes):
# the pure crates' binaries (unstuck-core, unstuck-backend) need none;
# every binary of unstuck may bring up clusters or containers, so it
# needs the local cluster's set-up and both images; one whose source
# names the newest Kubernetes version that version's build too; the kind
# binaries the kind node image, krew_plugin the krew CLI.
NEWEST="$(sed -n 's/^pub const NEWEST_K8S_VERSION: &str = "\(v[0-9.]*\)";/\1/p' harness/unstuck/src/components.rs)"
needs() {
  local bin="$1" dir
  dir="$(awk -v b="$bin" '$1 == b {print $2}' "$LOGS/binaries")"
  case "$dir" in */unstuck-core|*/unstuck-backend) return 0 ;; esac
  echo "ci/setup.sh"; echo "ci/images/backend.sh"; echo "ci/images/registry.sh"
  # A test that names the newest version brings up clusters of it
  # (newest_version, vac_protection's second half): found in its source,
  # so that a new one cannot start before the build it needs.
  local name; name="$(basename "$bin" | sed 's/-[0-9a-f]\{16\}$//')"
  if grep -qs "NEWEST_K8S_VERSION" "$dir/tests/$name.rs" "$dir/tests/$name"/*.rs; then
    echo "ci/setup.sh --k8s-version $NEWEST"
  fi
  case "$(basename "$bin")" in
    kind_provider-*|cluster_cli-*) echo "ci/kind/setup.sh" ;;
    krew_plugin-*) echo "ci/release/krew-cli.sh" ;;
  esac
}
# ready BINARY: 0 when every step it needs is done (or was never
# announced: run-tests.sh alone), 1 while one runs, 2 when one failed —
# then its name is printed.
ready() {
  local step state rc=0
  while read -r step; do
    [ -n "$step" ] || continue
    state="$(step_state "$step")"
    case "$state" in
      failed) echo "$step"; return 2 ;;
      running) rc=1 ;;
    esac
  done < <(needs "$1")
  return "$rc"
}

# "passed failed" summed over a log's "test result:" lines.
counts() {
  awk '/^test result: /{for(i=1;i<NF;i++){if($(i+1)~/^passed/)p+=$i; if($(i+1)~/^failed/)f+=$i}} END{print p+0, f+0}' "$1"
}

# run_one BINARY PART [test args...]
run_one() {
  local bin="$1" part="$2" name log start; shift 2
  name="$(basename "$bin")"; log="$(job_log "$bin" "$part")"
  start=$(date +%s)
  # Each binary runs from its crate's directory, as cargo test does.
  local dir; dir="$(awk -v b="$bin" '$1 == b {print $2}' "$LOGS/binaries")"
  # node_faults' tests each bring up a cluster of their own and mostly
  # wait on the kubelet: three at once rather than libtest's one per core.
  local extra=()
  case "$name" in node_faults-*) extra=(--test-threads=3) ;; esac
  case "$part" in
    1) extra+=("$(split_filter "$bin")") ;;
    2) extra+=(--skip "$(split_filter "$bin")") ;;
  esac
  ( cd "${dir:-.}" && "$bin" "${extra[@]}" "$@" ) >"$log" 2>&1
  local rc=$?
  echo "$rc $(( $(date +%s) - start ))" > "$log.rc"
}

# not_run BINARY PART STEP: the binary is failed without running, its log
# says which set-up step it needed failed and where that step's log is.
not_run() {
  local log; log="$(job_log "$1" "$2")"
  echo "not run: the set-up step '$3' it needs failed (its log: $(step_log "$3"))" > "$log"
  echo "1 0" > "$log.rc"
}

# schedule MAX JOB...: runs the jobs, at most MAX at once, in the order
# given, except that a job whose set-up is not done yet lets the next
# ready one go first.
schedule() {
  local max="$1" job bin part state i started failed_step; shift
  local pending=("$@")
  while [ ${#pending[@]} -gt 0 ]; do
    started=0
    if [ "$(jobs -rp | wc -l)" -lt "$max" ]; then
      for i in "${!pending[@]}"; do
        job="${pending[$i]}"; bin="${job% *}"; part="${job#* }"
        failed_step="$(ready "$bin")"; state=$?
        if [ "$state" = 2 ]; then not_run "$bin" "$part" "$failed_step"; unset 'pending[i]'; started=1; break; fi
        if [ "$state" = 0 ]; then run_one "$bin" "$part" "${TEST_ARGS[@]}" & unset 'pending[i]'; started=1; break; fi
      done
      pending=("${pending[@]}")
    fi
    [ "$started" = 1 ] && continue
    # Nothing could start: with every slot taken, until a job ends (a
    # binary of a few seconds frees its slot at once); else until a set-up
    # step may have ended.
    if [ "$(jobs -rp | wc -l)" -ge "$max" ]; then wait -n; else sleep 2; fi
  done
  wait
}
TEST_ARGS=("$@")
tests_start=$(date +%s)
schedule "$JOBS" "${EARLY[@]}"
schedule 1 "${LATE[@]}"
phase_record "test binaries (side by side; each below)" "$(( $(date +%s) - tests_start ))"

passed=0; failed=0; bad=(); bad_logs=(); times=()
for job in "${JOBS_LIST[@]}"; do
  bin="${job% *}"; part="${job#* }"
  name="$(job_name "$bin" "$part")"; log="$(job_log "$bin" "$part")"
  read -r rc secs < "$log.rc"
  echo "     Running $name (${secs} s, exit $rc)"
  cat "$log"
  times+=("$secs"$'\t'"$name"$'\t'"$([ "$rc" = 0 ] || echo "exit $rc")")
  read -r p f < <(counts "$log")
  passed=$(( passed + p )); failed=$(( failed + f ))
  if [ "$rc" != 0 ]; then
    bad+=("$name"); bad_logs+=("$log")
    # A binary that died before its summary still counts as a failure.
    [ "$f" -gt 0 ] || failed=$(( failed + 1 ))
  fi
done
# Each job under the side-by-side phase, the slowest first (they overlap:
# their sum is more than the phase).
while IFS=$'\t' read -r secs name note; do
  phase_record "  $(sed 's/-[0-9a-f]\{16\}//' <<<"$name")" "$secs" "$note"
done < <(printf '%s\n' "${times[@]}" | sort -t$'\t' -k1,1nr)

# The set-up steps still running (clippy, a build no test needed) are
# waited for; a failed one is a failure of the run, its log's tail below.
while read -r step; do
  [ -n "$step" ] || continue
  step_wait "$step" && continue
  bad+=("set-up: $step"); bad_logs+=("$(step_log "$step")"); failed=$((failed + 1))
done < <(steps_announced)

# Doc tests are not binaries of their own.
if phase "doc tests" cargo test --workspace --doc >"$LOGS/doc.log" 2>&1; then :; else bad+=("doctests"); bad_logs+=("$LOGS/doc.log"); failed=$((failed + 1)); fi
cat "$LOGS/doc.log"
read -r p f < <(counts "$LOGS/doc.log")
passed=$(( passed + p ))

# CI keeps only the end of the output: repeat each failure's panic
# message there, short, so that a failed run can be read from its tail.
for i in "${!bad[@]}"; do
  [ -f "${bad_logs[$i]}" ] || continue
  case "${bad[$i]}" in
    "set-up: "*) echo "---- ${bad[$i]} failed; the end of its log:"; tail -25 "${bad_logs[$i]}" | cut -c1-400; continue ;;
  esac
  echo "---- ${bad[$i]}: failures"
  grep -E -A12 "^thread '.*' .*panicked at" "${bad_logs[$i]}" | grep -v "^ *[0-9]*: \|^ *at " | cut -c1-400 | head -40
done
[ ${#bad[@]} -eq 0 ] || echo "failed test binaries: ${bad[*]} (logs in $LOGS/)"
# The phase table, then the closing line: CI reads the run from its tail.
phases_table
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
