#!/bin/sh
# dockerd runtime wrapper for hosts whose capability bounding set lacks
# CAP_SYS_RESOURCE (some sandboxed VMs). `docker run --privileged` asks runc
# for every capability the daemon knows; runc then fails with
# "unable to apply caps: operation not permitted" because a process can never
# gain a capability outside its bounding set. kind runs every node with
# --privileged and every command with `docker exec --privileged`, so this
# wrapper removes CAP_SYS_RESOURCE from
#   - the bundle's config.json on `create` and `run`, and
#   - the --process JSON on `exec`,
# then execs the real runc with the unchanged arguments. Everything else is
# passed through. ci/kind/setup.sh installs it (as unstuck-runc) and registers
# it as dockerd's default runtime only when /proc/self/status shows the
# capability missing from CapBnd.
#
# The real runc may be overridden with UNSTUCK_REAL_RUNC (default: runc on PATH).
REAL_RUNC="${UNSTUCK_REAL_RUNC:-/usr/sbin/runc}"
[ -x "$REAL_RUNC" ] || REAL_RUNC=$(command -v runc)

DROP='def drop: if type == "array" then map(select(. != "CAP_SYS_RESOURCE")) else . end;'

strip() { # strip FILE JQ_PATH_PREFIX
  [ -f "$1" ] || return 0
  grep -q CAP_SYS_RESOURCE "$1" || return 0
  tmp="$1.unstuck.$$"
  if jq -c "$DROP $2 |= (if . == null then . else with_entries(.value |= drop) end)" "$1" > "$tmp"; then
    cat "$tmp" > "$1"   # keep the file's inode and mode
  fi
  rm -f "$tmp"
}

cmd="" bundle="" process="" prev=""
for a in "$@"; do
  case "$prev" in
    --bundle|-b) bundle="$a" ;;
    --process|-p) process="$a" ;;
  esac
  case "$a" in
    --bundle=*) bundle="${a#--bundle=}" ;;
    --process=*) process="${a#--process=}" ;;
  esac
  if [ -z "$cmd" ]; then
    case "$a" in create|run|exec) case "$prev" in --root|--log|--log-format|--criu) ;; *) cmd="$a" ;; esac ;; esac
  fi
  prev="$a"
done

case "$cmd" in
  create|run) strip "${bundle:-.}/config.json" '.process.capabilities' ;;
  exec) [ -n "$process" ] && strip "$process" '.capabilities' ;;
esac
exec "$REAL_RUNC" "$@"
