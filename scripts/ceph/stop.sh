#!/usr/bin/env bash
# Stops the cluster that scripts/ceph/start.sh started under DIR (radosgw,
# then ceph-osd, then ceph-mon), waits until every daemon has exited, and
# removes DIR. Safe to run twice, on a half-started cluster, or on a DIR
# that does not exist.
#
# Environment:
#   CEPH_KEEP_DIR=1   leave DIR (logs, data) in place after stopping
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir="$(ceph_resolve_dir "$1")"
[ -e "$dir" ] || exit 0
[ -f "$dir/$CEPH_DIR_MARKER" ] \
  || ceph_die "$dir was not created by scripts/ceph/start.sh; not touching it"
conf="$dir/ceph.conf"

rc=0
ceph_stop_pid "$dir" radosgw "$dir/run/rgw.pid" 20 || rc=1
ceph_stop_pid "$dir" ceph-osd "$dir/run/osd.pid" 20 || rc=1
ceph_stop_pid "$dir" ceph-mon "$dir/run/mon.pid" 20 || rc=1

# Anything else still running against this cluster's configuration goes
# too.
ceph_kill_leftovers "$dir" || rc=1

[ $rc -eq 0 ] || ceph_die "some daemons under $dir did not stop; leaving $dir in place"
if [ "${CEPH_KEEP_DIR:-0}" != 1 ]; then
  rm -rf -- "$dir"
fi
