#!/usr/bin/env bash
# Checks the single-node Ceph S3 setup end to end: installs the packages,
# starts a cluster in a temporary directory, runs an S3 round trip (put, get,
# list, delete, and a 12 MiB multipart upload) with boto3, stops and
# restarts the gateway and reads the multipart object again, then stops the
# cluster. Prints how long each phase took. Exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

phase_ms=$(ceph_now_ms)
total_ms=$phase_ms
timings=()
phase() {
  local now
  now=$(ceph_now_ms)
  timings+=("$(printf '%-32s %6d ms' "$1" $(( now - phase_ms )))")
  printf 'selftest: %s done (%d ms)\n' "$1" $(( now - phase_ms ))
  phase_ms=$now
}

"$here/install.sh"
python_bin="$repo/.venv/bin/python"
if [ ! -x "$python_bin" ]; then
  "$repo/scripts/install_deps.sh"
elif ! "$python_bin" -c 'import boto3' 2>/dev/null; then
  boto3_req="$(grep -E '^boto3==' "$repo/scripts/requirements.txt")" \
    || ceph_die "scripts/requirements.txt pins no boto3 version"
  "$repo/.venv/bin/pip" install -q --disable-pip-version-check "$boto3_req"
fi
phase "install"

dir="$(mktemp -d "${TMPDIR:-/tmp}/gpuctl-ceph-selftest.XXXXXX")"
cleanup() {
  local rc=$?
  if [ $rc -ne 0 ]; then
    CEPH_KEEP_DIR=1 "$here/stop.sh" "$dir" || true
    ceph_log "selftest failed; logs kept in $dir/log"
  else
    "$here/stop.sh" "$dir"
  fi
  exit $rc
}
trap cleanup EXIT

"$here/start.sh" "$dir"
phase "start"

set -a
# shellcheck disable=SC1091
. "$dir/env"
set +a
s3_check() { "$python_bin" "$here/s3_check.py" "$1"; }

s3_check roundtrip
phase "S3 round trip + 12 MiB multipart"

"$here/rgw.sh" "$dir" stop
phase "radosgw stop"
s3_check down
phase "S3 refused while stopped"
"$here/rgw.sh" "$dir" start
phase "radosgw start"
s3_check reread
phase "re-read after restart"

trap - EXIT
"$here/stop.sh" "$dir"
[ ! -e "$dir" ] || ceph_die "stop.sh left $dir behind"
phase "stop"

printf '\nselftest: passed in %d ms\n' $(( $(ceph_now_ms) - total_ms ))
printf '  %s\n' "${timings[@]}"
