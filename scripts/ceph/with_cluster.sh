#!/usr/bin/env bash
# Runs COMMAND with the S3 environment of a single-node Ceph cluster
# (S3_ENDPOINT, S3_REGION, S3_BUCKET, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY, ... from DIR/env; see start.sh), for tests that
# need a real S3 gateway. CTest runs s3_client_radosgw_test through it.
#
#   with_cluster.sh COMMAND [ARGS...]
#
# The cluster, first match wins:
#   GPUCTL_TEST_CEPH_DIR set   the cluster started there (scripts/test.sh
#                              starts one for the whole suite)
#   Ceph installed             a cluster of its own in a temporary directory,
#                              stopped again when COMMAND exits
#   neither                    exit 77 (CTest's SKIP_RETURN_CODE) with the
#                              reason; with CI=true, exit 1 instead: CI must
#                              never pass without running these tests
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

load_env() {
  [ -f "$1/env" ] || ceph_die "$1/env not found: no cluster started by scripts/ceph/start.sh there"
  set -a
  # shellcheck disable=SC1091
  . "$1/env"
  set +a
}

if [ -n "${GPUCTL_TEST_CEPH_DIR:-}" ]; then
  load_env "$GPUCTL_TEST_CEPH_DIR"
  exec "$@"
fi

if ! command -v radosgw >/dev/null || ! command -v ceph-mon >/dev/null; then
  reason="no S3 gateway: GPUCTL_TEST_CEPH_DIR is unset and Ceph is not installed (run scripts/ceph/install.sh)"
  if [ "${CI:-}" = true ]; then
    ceph_die "$reason"
  fi
  ceph_log "skipped: $reason"
  exit 77
fi

dir="$(mktemp -d "${TMPDIR:-/tmp}/gpuctl-ceph.XXXXXX")"
# shellcheck disable=SC2317  # run by the EXIT trap
stop_cluster() { "$here/stop.sh" "$dir" || true; }
trap stop_cluster EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$here/start.sh" "$dir"
load_env "$dir"
rc=0
"$@" || rc=$?
exit "$rc"
