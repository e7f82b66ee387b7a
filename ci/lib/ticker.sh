# shellcheck shell=bash
# A long build says it is still going: on a terminal one line redrawn
# every two seconds, elsewhere (a CI log) a plain line every 30 seconds —
# what it waits for, the time so far and what it usually takes.
#
#   source ci/lib/ticker.sh
#   with_ticker WHAT USUALLY CMD [ARGS...]   CMD's status
#
#   with_ticker "go build of kubernetes v1.34.4" "6-11 min cold on 2 cores" go build ...

with_ticker() {
  local what="$1" usually="$2" start ticker rc=0; shift 2
  start=$(date +%s)
  (
    if [ -t 2 ]; then
      while sleep 2; do
        printf '\r\033[2K  … %s: %s s so far (usually %s)' "$what" "$(( $(date +%s) - start ))" "$usually" >&2
      done
    else
      while sleep 30; do
        printf '[%s] still running %s: %s s so far (usually %s)\n' "$(date +%H:%M:%S)" "$what" "$(( $(date +%s) - start ))" "$usually" >&2
      done
    fi
  ) &
  ticker=$!
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  if [ -t 2 ]; then printf "\r\033[2K" >&2; fi
  return "$rc"
}
