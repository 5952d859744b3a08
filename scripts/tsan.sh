#!/usr/bin/env bash
# Builds the threaded, gRPC-service-free tests (client library, daemon core,
# local store, IPC server) with ThreadSanitizer and runs them.
#
#   scripts/tsan.sh [BUILD_DIR]     (default: build-tsan under the repo)
#
# Exits non-zero on any test failure or data race report. Debian's absl is
# not TSan-instrumented, so absl::Mutex-guarded code is reported falsely
# until absl is built with TSan (docs/testing.md); test/tsan.supp holds
# suppressions for uninstrumented library internals only.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-tsan}"
jobs="${GPUCTL_JOBS:-2}"
# client_lib_fork_test is left out: it starts threads in the child of a
# multi-threaded fork, which TSan does not support (the child dies, or with
# die_after_fork=0 misbehaves).
targets=(client_lib_unit_test client_lib_agent_test
  client_lib_host_source_test client_lib_record_writer_test
  gpuctl_daemon_common_test gpuctl_daemon_core_test gpuctl_local_store_test ipc_server_test)

start=$(date +%s)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUCTL_TSAN=ON \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null
ninja -C "$build" -j"$jobs" "${targets[@]}"
built=$(date +%s)

# halt_on_error makes the first race fail its test; second_deadlock_stack
# gives both stacks of a lock-order report.
export TSAN_OPTIONS="suppressions=$root/test/tsan.supp halt_on_error=1 second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}"
# Each binary runs whole (CTest's per-case processes would multiply the
# TSan start-up cost).
status=0
for t in "${targets[@]}"; do
  if ! "$build/bin/$t" --gtest_brief=1 >"$build/$t.tsan.log" 2>&1; then
    echo "FAIL $t (log: $build/$t.tsan.log)"
    grep -m5 -E "WARNING: ThreadSanitizer|\[  FAILED  \]" "$build/$t.tsan.log" || true
    status=1
  else
    echo "ok   $t"
  fi
done
end=$(date +%s)
echo "tsan: build $((built - start))s, tests $((end - built))s"
exit $status
