#!/usr/bin/env bash
# Stops or (re)starts only the S3 gateway (radosgw) of the cluster that
# scripts/ceph/start.sh started under DIR, for tests that take the object
# store away in the middle of an upload. The gateway comes back on the same
# port with the same data and credentials; DIR/env gets its new pid
# (CEPH_RGW_PID is empty while it is stopped).
#
#   rgw.sh DIR stop      SIGTERM radosgw and wait until it has exited
#   rgw.sh DIR kill      SIGKILL radosgw (a crash) and wait until it is gone
#   rgw.sh DIR start     start radosgw and wait until it serves S3 requests
#   rgw.sh DIR restart   stop, then start
#   rgw.sh DIR status    exit 0 when radosgw serves S3 requests, 1 otherwise
#
# Environment:
#   CEPH_WAIT_TIMEOUT    seconds to wait for the gateway (default 60)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

[ $# -eq 2 ] || { echo "usage: $0 DIR stop|kill|start|restart|status" >&2; exit 2; }
dir="$(ceph_resolve_dir "$1")"
if [ ! -f "$dir/$CEPH_DIR_MARKER" ] || [ ! -f "$dir/run/rgw.port" ]; then
  ceph_die "$dir holds no cluster started by scripts/ceph/start.sh"
fi
timeout="${CEPH_WAIT_TIMEOUT:-60}"
[[ "$timeout" =~ ^[1-9][0-9]{0,4}$ ]] || ceph_die "CEPH_WAIT_TIMEOUT must be a positive integer of seconds"

rgw_kill() {
  local pid
  [ -f "$dir/run/rgw.pid" ] || return 0
  pid="$(cat "$dir/run/rgw.pid")"
  if ceph_pid_is_ours "$pid" "$dir/ceph.conf"; then
    kill -KILL "$pid" 2>/dev/null || true
    ceph_wait_until 10 "radosgw (pid $pid) to exit" - "" -- ceph_gone "$pid"
  fi
  rm -f "$dir/run/rgw.pid"
}

case "$2" in
  stop)
    ceph_stop_pid "$dir" radosgw "$dir/run/rgw.pid" 20
    ceph_env_set "$dir" CEPH_RGW_PID ""
    ;;
  kill)
    rgw_kill
    ceph_env_set "$dir" CEPH_RGW_PID ""
    ;;
  start) ceph_rgw_start "$dir" "$timeout" ;;
  restart)
    ceph_stop_pid "$dir" radosgw "$dir/run/rgw.pid" 20
    ceph_rgw_start "$dir" "$timeout"
    ;;
  status) ceph_rgw_ready "$(cat "$dir/run/rgw.port")" ;;
  *) echo "usage: $0 DIR stop|kill|start|restart|status" >&2; exit 2 ;;
esac
