#!/usr/bin/env bash
# Builds the threaded, gRPC-service-free tests (client library, daemon core,
# local store, IPC server) with ThreadSanitizer and runs them.
#
#   scripts/tsan.sh [BUILD_DIR]     (default: build-tsan under the repo)
#
# Exits non-zero on any test failure and on any ThreadSanitizer report that
# test/tsan.supp does not suppress. That file holds suppressions for the
# internals of uninstrumented libraries only (Debian's absl is not built
# with TSan; docs/testing.md), each with its reason.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-tsan}"
jobs="${GPUCTL_JOBS:-2}"
# client_lib_fork_test is left out: it starts threads in the child of a
# multi-threaded fork, which TSan does not support (the child dies, or with
# die_after_fork=0 misbehaves).
targets=(client_lib_unit_test client_lib_agent_test
  client_lib_host_source_test client_lib_record_writer_test
  gpuctl_daemon_common_test event_loop_test gpuctl_convert_test gpuctl_daemon_core_test
  gpuctl_store_test ipc_server_test)

start=$(date +%s)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUCTL_TSAN=ON \
  >/dev/null
# The CUPTI tests exist only where cupti.h was found (client_lib/CMakeLists.txt).
if ninja -C "$build" -t targets all | grep -q '^client_lib_cupti_test:'; then
  targets+=(client_lib_cupti_test)
fi
ninja -C "$build" -j"$jobs" "${targets[@]}"
built=$(date +%s)

# Every report not matched by test/tsan.supp fails the run. halt_on_error
# stops a binary at its first report; the log is also scanned, so that a
# report from a child process, or one printed by a binary that still exited
# 0, fails too. print_suppressions lists what the suppressions hid.
# second_deadlock_stack gives both stacks of a lock-order report.
export TSAN_OPTIONS="suppressions=$root/test/tsan.supp halt_on_error=1 print_suppressions=1 second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}"
# Each binary runs whole (CTest's per-case processes would multiply the
# TSan start-up cost).
status=0
for t in "${targets[@]}"; do
  log="$build/$t.tsan.log"
  rc=0
  "$build/bin/$t" --gtest_brief=1 >"$log" 2>&1 || rc=$?
  reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
  suppressed=$(sed -n 's/^ThreadSanitizer: Matched \([0-9]*\) suppressions.*/\1/p' "$log" |
    awk '{n += $1} END {print n + 0}')
  if [[ $rc -ne 0 || $reports -gt 0 ]]; then
    echo "FAIL $t: exit $rc, $reports report(s) (log: $log)"
    grep -E "^SUMMARY: ThreadSanitizer|\[  FAILED  \]" "$log" | sort | uniq -c | head -n 10 || true
    status=1
  else
    echo "ok   $t ($suppressed suppressed)"
  fi
done
end=$(date +%s)
echo "tsan: build $((built - start))s, tests $((end - built))s"
exit $status
