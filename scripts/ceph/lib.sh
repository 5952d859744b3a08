# shellcheck shell=bash
# Shared helpers for the single-node Ceph cluster scripts (start.sh, stop.sh,
# rgw.sh). Sourced, not run. Every wait polls a condition up to a deadline
# and, on timeout or when the daemon it waits for dies, prints the tail of
# that daemon's log.

# The cluster's S3 gateway runs as this Ceph entity.
readonly CEPH_RGW_NAME=client.rgw.gpuctl
# Marker written by start.sh; stop.sh only deletes a directory carrying it.
# shellcheck disable=SC2034  # used by the scripts that source this file
readonly CEPH_DIR_MARKER=.gpuctl-ceph

ceph_log() { printf 'ceph: %s\n' "$*" >&2; }
ceph_die() { ceph_log "error: $*"; exit 1; }

# ceph_resolve_dir DIR: prints DIR as an absolute path. The path ends up in
# ceph.conf and in the env file unquoted, so only plain characters are taken.
ceph_resolve_dir() {
  local dir
  [ -n "${1:-}" ] || ceph_die "missing DIR argument"
  dir="$(realpath -m -- "$1")"
  [[ "$dir" =~ ^[A-Za-z0-9._/+@-]+$ ]] \
    || ceph_die "DIR '$dir' has characters other than letters, digits and ._/+@-"
  [ "$dir" != / ] || ceph_die "DIR must not be /"
  printf '%s\n' "$dir"
}

# ceph_now_ms: milliseconds since the epoch.
ceph_now_ms() { date +%s%3N; }

# ceph_tail_logs FILE...: prints the last lines of each existing file.
ceph_tail_logs() {
  local f
  for f in "$@"; do
    [ -s "$f" ] || continue
    printf -- '----- last lines of %s -----\n' "$f" >&2
    tail -n "${CEPH_LOG_TAIL_LINES:-40}" "$f" >&2
  done
}

# ceph_pid_is_ours PID CONF: true when PID is a live process started with
# "-c CONF" (guards against signalling a recycled pid).
ceph_pid_is_ours() {
  local pid="$1" conf="$2" cmdline
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  ceph_alive "$pid" || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ " $cmdline " == *" -c $conf "* ]]
}

# ceph_alive PID: true while PID runs (a zombie, which an init that does not
# reap would leave behind, counts as gone).
ceph_alive() {
  local state
  state="$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# ceph_wait_until SECONDS WHAT PID LOGS -- COMMAND...: runs COMMAND every
# 0.2 s until it succeeds. Fails, printing LOGS (a space-separated list),
# when SECONDS pass or when PID (if not "-") exits.
ceph_wait_until() {
  local seconds="$1" what="$2" pid="$3" logs="$4"
  shift 5
  local deadline=$(( $(ceph_now_ms) + seconds * 1000 ))
  while :; do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    if [ "$pid" != - ] && ! ceph_alive "$pid"; then
      ceph_log "error: process $pid exited while waiting for $what"
      # shellcheck disable=SC2086
      ceph_tail_logs $logs
      return 1
    fi
    if [ "$(ceph_now_ms)" -ge "$deadline" ]; then
      ceph_log "error: timed out after ${seconds}s waiting for $what"
      # shellcheck disable=SC2086
      ceph_tail_logs $logs
      return 1
    fi
    sleep 0.2
  done
}

# ceph_spawn OUTFILE COMMAND...: starts COMMAND in the background in its own
# session (so a signal to the caller's process group does not reach it),
# output appended to OUTFILE. Prints its pid.
ceph_spawn() {
  local out="$1"
  shift
  # Without job control a background job is not a process-group leader, so
  # setsid calls setsid(2) itself and execs: $! is the daemon's own pid.
  setsid "$@" </dev/null >>"$out" 2>&1 &
  printf '%s\n' "$!"
}

# ceph_port_free PORT: true when nothing can be listening on 127.0.0.1:PORT
# (a bind succeeds).
ceph_port_free() {
  /usr/bin/python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
}

# ceph_pick_port: prints a free port in 20000-32767, below the kernel's
# ephemeral range so that no outgoing connection takes it before the daemon
# binds it.
ceph_pick_port() {
  local port
  for _ in $(seq 1 50); do
    port=$(( 20000 + RANDOM % 12768 ))
    if ceph_port_free "$port"; then
      printf '%s\n' "$port"
      return 0
    fi
  done
  ceph_die "no free port found in 20000-32767"
}

# ceph_env_get DIR KEY: prints KEY's value from DIR/env.
ceph_env_get() {
  sed -n "s/^$2=//p" "$1/env" | tail -n 1
}

# ceph_env_set DIR KEY VALUE: replaces (or appends) KEY in DIR/env.
ceph_env_set() {
  local env="$1/env" tmp
  tmp="$(mktemp "$1/env.XXXXXX")"
  { grep -v "^$2=" "$env" 2>/dev/null || true; printf '%s=%s\n' "$2" "$3"; } >"$tmp"
  mv -f "$tmp" "$env"
}

# ceph_http_status URL: prints the HTTP status code of a GET (000 when no
# connection).
ceph_http_status() {
  curl -s -o /dev/null -m 5 -w '%{http_code}' "$1" || true
}

# ceph_rgw_ready PORT: the gateway answers an anonymous ListBuckets.
ceph_rgw_ready() {
  [ "$(ceph_http_status "http://127.0.0.1:$1/")" = 200 ]
}

# ceph_rgw_start DIR TIMEOUT: starts radosgw on its configured port and
# waits until it serves requests. Records its pid in DIR/run/rgw.pid and
# DIR/env.
ceph_rgw_start() {
  local dir="$1" timeout="$2" port pid
  port="$(cat "$dir/run/rgw.port")"
  if [ -f "$dir/run/rgw.pid" ] && ceph_pid_is_ours "$(cat "$dir/run/rgw.pid")" "$dir/ceph.conf"; then
    ceph_die "radosgw already running (pid $(cat "$dir/run/rgw.pid"))"
  fi
  ceph_port_free "$port" || ceph_die "port $port (radosgw) is in use by another process"
  pid="$(ceph_spawn "$dir/log/radosgw.out" radosgw -f -c "$dir/ceph.conf" -n "$CEPH_RGW_NAME")"
  printf '%s\n' "$pid" >"$dir/run/rgw.pid"
  ceph_env_set "$dir" CEPH_RGW_PID "$pid"
  if ! ceph_wait_until "$timeout" "radosgw on 127.0.0.1:$port" "$pid" \
      "$dir/log/radosgw.out $dir/log/$CEPH_RGW_NAME.log" -- ceph_rgw_ready "$port"; then
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/run/rgw.pid"
    ceph_env_set "$dir" CEPH_RGW_PID ""
    return 1
  fi
}

ceph_gone() { ! ceph_alive "$1"; }

# ceph_stop_pid DIR NAME PIDFILE TIMEOUT: SIGTERM, then SIGKILL after
# TIMEOUT seconds; waits until the process is gone.
ceph_stop_pid() {
  local dir="$1" name="$2" pidfile="$3" timeout="$4" pid
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if ceph_pid_is_ours "$pid" "$dir/ceph.conf"; then
    kill -TERM "$pid" 2>/dev/null || true
    if ! ceph_wait_until "$timeout" "$name (pid $pid) to exit" - "" -- \
        ceph_gone "$pid"; then
      ceph_log "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      ceph_wait_until 10 "$name (pid $pid) to exit after SIGKILL" - "" -- \
        ceph_gone "$pid" || return 1
    fi
  fi
  rm -f "$pidfile"
}

# ceph_kill_leftovers DIR: SIGKILLs every process still running with
# "-c DIR/ceph.conf" (a gateway whose pid file was lost, a radosgw-admin left
# behind by an interrupted start) and waits until they are gone.
ceph_kill_leftovers() {
  local conf="$1/ceph.conf" cmdline pid rc=0
  for cmdline in $(grep -laF -- "$conf" /proc/[0-9]*/cmdline 2>/dev/null || true); do
    pid="${cmdline#/proc/}"
    pid="${pid%/cmdline}"
    [ "$pid" != $$ ] || continue
    if ceph_pid_is_ours "$pid" "$conf"; then
      ceph_log "killing leftover process $pid: $(tr '\0' ' ' <"$cmdline" 2>/dev/null)"
      kill -KILL "$pid" 2>/dev/null || true
      ceph_wait_until 10 "process $pid to exit" - "" -- ceph_gone "$pid" || rc=1
    fi
  done
  return $rc
}
