# shellcheck shell=bash
# Locks for the shared caches under $UNSTUCK_CACHE (default
# ~/.cache/unstuck), sourced by the set-up scripts. Two CI jobs on one
# host may run the same set-up at once: the second must wait for a cache
# the first is building and then find it built, not build it again beside
# it (two Kubernetes builds at once on 2 cores take twice as long, and
# both write the same files).
#
#   source ci/lib/lock.sh
#   with_cache_lock NAME CMD [ARGS...]   run CMD (a function too) holding NAME
#   cache_lock NAME                      hold NAME until the script exits
#   without_cache_locks CMD [ARGS...] &  start CMD with no lock fd open in it
#
# One lock file per cache: $UNSTUCK_CACHE/locks/NAME.lock, taken with
# flock(1) on a file descriptor of this shell, so the kernel releases it
# when the script ends however it ends (an error under `set -e`, a kill).
# Whoever holds a lock writes its pid and command into the file, so a
# waiting script can say whom it waits for. A command that outlives the
# script (dockerd) must be started through without_cache_locks: it would
# otherwise inherit the descriptor and hold the lock for ever.
#
# The caller re-checks its cache once it holds the lock: the holder before
# it may just have built it. Builds publish by rename (a temporary file or
# directory beside the cache, moved into place when complete), so a
# reader that takes no lock never sees half a cache either.

UNSTUCK_LOCK_DIR="${UNSTUCK_LOCK_DIR:-${UNSTUCK_CACHE:-$HOME/.cache/unstuck}/locks}"
# NAME -> fd of the locks this shell holds.
declare -gA _UNSTUCK_LOCK_FDS=()

_lock_log() { printf '[lock %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# _lock_take NAME: opens NAME's lock file and waits until it is ours.
_lock_take() {
  local name="$1" file fd holder t0
  case "$name" in *[!A-Za-z0-9._-]*|'') _lock_log "bad lock name '$name'"; return 2 ;; esac
  if [ -n "${_UNSTUCK_LOCK_FDS[$name]:-}" ]; then
    _lock_log "$name is already held by this script"; return 2
  fi
  mkdir -p "$UNSTUCK_LOCK_DIR"
  file="$UNSTUCK_LOCK_DIR/$name.lock"
  # Opened for appending: opening must not truncate what the holder wrote.
  exec {fd}>>"$file"
  if ! flock -n "$fd"; then
    holder="$(head -c 300 "$file" 2>/dev/null | head -1)"
    _lock_log "waiting for $name: another process is building it (${holder:-holder unknown}; lock $file)"
    t0=$(date +%s)
    flock "$fd"
    _lock_log "got $name after $(( $(date +%s) - t0 ))s"
  fi
  printf 'pid %s: %s\n' "$$" "$(tr '\0' ' ' < /proc/$$/cmdline 2>/dev/null)" > "$file"
  _UNSTUCK_LOCK_FDS[$name]=$fd
}

# _lock_release NAME: gives NAME back (closing the fd releases the lock).
_lock_release() {
  local name="$1" fd="${_UNSTUCK_LOCK_FDS[$1]:-}"
  [ -n "$fd" ] || return 0
  unset '_UNSTUCK_LOCK_FDS[$name]'
  exec {fd}>&-
}

# with_cache_lock NAME CMD [ARGS...]: runs CMD holding lock NAME and
# returns its status. CMD is not called in a `||` list, which would turn
# `set -e` off inside it: under `set -e` a failing CMD ends the script,
# and with it the lock.
with_cache_lock() {
  local name="$1" rc; shift
  _lock_take "$name" || return
  "$@"
  rc=$?
  _lock_release "$name"
  return "$rc"
}

# cache_lock NAME: holds NAME for the rest of the script.
cache_lock() {
  _lock_take "$1"
}

# without_cache_locks CMD [ARGS...]: CMD with every lock fd closed, for a
# process that outlives the lock (a daemon).
without_cache_locks() {
  if [ "$BASHPID" != "$$" ]; then
    # Already a subshell of its own (`without_cache_locks CMD &`): close
    # the fds here and become CMD. A nested subshell would keep them open
    # in this one for as long as CMD runs.
    local fd
    for fd in "${_UNSTUCK_LOCK_FDS[@]}"; do exec {fd}>&-; done
    exec "$@"
  fi
  (
    for fd in "${_UNSTUCK_LOCK_FDS[@]}"; do exec {fd}>&-; done
    exec "$@"
  )
}
