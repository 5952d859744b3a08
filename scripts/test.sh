#!/usr/bin/env bash
# Builds gpuctl and runs the whole test suite and its checks, in order:
#   1. static checks: the include direction (docs/architecture.md) and
#      clang-format over every C++ file;
#   2. a Clang build with AddressSanitizer + UBSan, -Werror and
#      -Wthread-safety (build-asan/), and every test on it (unit,
#      end-to-end, S3, HTA, deployment, layout);
#   3. clang-tidy (scripts/clang_tidy.sh) with that build's compile commands;
#   4. ThreadSanitizer over the threaded, gRPC-free tests (scripts/tsan.sh);
#   5. a bounded run of every libFuzzer target (scripts/fuzz.sh);
#   6. a normal optimised GCC build (build/) of what ships, on which
#      everything but the unit tests runs again: the end-to-end tests drive
#      the binaries users get. Its CTest summary is printed last.
# Exits non-zero if anything fails to build or any check or test fails. Both
# test passes run against one single-node Ceph cluster with an S3 gateway
# (scripts/ceph), started after the first build and stopped on exit.
#
#   ./scripts/test.sh            everything
#   GPUCTL_SKIP_ASAN=1 ./scripts/test.sh   normal pass only (unit tests included)
#   GPUCTL_SKIP_TSAN=1, GPUCTL_SKIP_TIDY=1  leave out those steps
#   GPUCTL_JOBS=N                build and test parallelism (default: 2)
#   GPUCTL_FUZZ_SECONDS=N        each libFuzzer target's run (default: 5; 0: none)
#   GPUCTL_ASAN_E2E=1            the end-to-end tests in the sanitizer pass too
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${GPUCTL_JOBS:-2}"
started=$(date +%s)
log_dir="$(mktemp -d "${TMPDIR:-/tmp}/gpuctl-test.XXXXXX")"
ceph_dir=""
# The Ceph cluster goes on every exit: success, failure, Ctrl-C or SIGTERM.
cleanup() {
  if [ -n "$ceph_dir" ] && ! ./scripts/ceph/stop.sh "$ceph_dir"; then
    echo "test.sh: stopping the Ceph cluster in $ceph_dir failed" >&2
  fi
  rm -rf "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

elapsed() { local s=$(( $(date +%s) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
# Each step is stamped with the time since the start, so a slow run shows
# where its minutes went.
step() { printf '\n==> [%s] %s\n' "$(elapsed "$started")" "$*"; }

# The S3 tests (test/e2e/test_s3*.py, s3_client_radosgw_test) share one
# single-node Ceph cluster with an S3 gateway, started once before the first
# test pass; they read its DIR/env through GPUCTL_TEST_CEPH_DIR.
start_ceph() {
  [ -z "$ceph_dir" ] || return 0
  step "Ceph cluster with an S3 gateway (scripts/ceph/start.sh)"
  ceph_dir="$log_dir/ceph"
  if ! ./scripts/ceph/start.sh "$ceph_dir" 2>"$log_dir/ceph-start.log"; then
    cat "$log_dir/ceph-start.log"
    return 1
  fi
  tail -n 1 "$log_dir/ceph-start.log"
  export GPUCTL_TEST_CEPH_DIR="$ceph_dir"
}

./scripts/install_deps.sh

# Compiler cache hits across clones at other paths (CI builds a fresh clone).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# Five builds (sanitizers, TSan, fuzzing, release) share the cache.
ccache --max-size=20G >/dev/null 2>&1 || true

# configure_and_build DIR [cmake args...]
configure_and_build() {
  local dir="$1"; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$log_dir/cmake.log" 2>&1 \
    || { cat "$log_dir/cmake.log"; return 1; }
  ninja -C "$dir" -j "$jobs"
}

# Checks that fail the run at the end, after everything else has run.
failed_checks=()

step "Static checks: include direction, clang-format"
python3 test/layout/check_includes.py || failed_checks+=("include direction (test/layout/check_includes.py)")
./scripts/format.sh --check || failed_checks+=("clang-format (scripts/format.sh --check)")

asan_rc=0
asan_time="skipped"
if [ "${GPUCTL_SKIP_ASAN:-0}" != 1 ]; then
  step "Clang ASan+UBSan build, -Werror -Wthread-safety (build-asan/)"
  asan_start=$(date +%s)
  # -O1 -g1: line tables are all the reports need, and the pass builds in
  # about two thirds of the time -O2 -g takes.
  CC=clang CXX=clang++ configure_and_build build-asan -DGPUCTL_SANITIZE=ON -DGPUCTL_WERROR=ON \
    -DGPUCTL_BUILD_BENCH=OFF \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  start_ceph
  step "ASan+UBSan tests"
  # The end-to-end tests run once, in the release pass, on the binaries
  # users get; GPUCTL_ASAN_E2E=1 runs them here too (e2e fixtures then scan
  # the daemon's and workloads' output for reports).
  asan_filter=(-LE e2e)
  [ "${GPUCTL_ASAN_E2E:-0}" != 1 ] || asan_filter=()
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" "${asan_filter[@]}" \
    >"$log_dir/asan.log" 2>&1 || asan_rc=$?
  # The sanitizer pass's own summary; its failures are printed in full.
  sed -n '/tests passed,/,$p' "$log_dir/asan.log"
  if [ "$asan_rc" -ne 0 ]; then
    cat "$log_dir/asan.log"
  fi
  asan_time="$(elapsed "$asan_start")"

  if [ "${GPUCTL_SKIP_TIDY:-0}" != 1 ]; then
    step "clang-tidy (scripts/clang_tidy.sh)"
    GPUCTL_JOBS="$jobs" ./scripts/clang_tidy.sh build-tidy || failed_checks+=("clang-tidy (scripts/clang_tidy.sh)")
  fi
fi

if [ "${GPUCTL_SKIP_TSAN:-0}" != 1 ]; then
  step "ThreadSanitizer (scripts/tsan.sh, build-tsan/)"
  GPUCTL_JOBS="$jobs" ./scripts/tsan.sh "$PWD/build-tsan" || failed_checks+=("ThreadSanitizer (scripts/tsan.sh)")
fi

# A bounded run of every libFuzzer target (Clang, build-fuzz-clang/) on a
# scratch copy of its seed corpus; longer campaigns: docs/testing.md.
fuzz_rc=0
fuzz_seconds="${GPUCTL_FUZZ_SECONDS:-5}"
if [ "$fuzz_seconds" != 0 ]; then
  step "Fuzzing, ${fuzz_seconds}s per target (scripts/fuzz.sh)"
  GPUCTL_JOBS="$jobs" ./scripts/fuzz.sh "$fuzz_seconds" 2>&1 | tee "$log_dir/fuzz.log" \
    || fuzz_rc=${PIPESTATUS[0]}
fi

step "Release build (build/)"
normal_start=$(date +%s)
# The unit tests ran in the sanitizer pass; without that pass they run here.
unit_tests=OFF
[ "${GPUCTL_SKIP_ASAN:-0}" != 1 ] || unit_tests=ON
# The PyTorch tests (label torch) run here only: PyTorch has no sanitizer
# builds.
configure_and_build build -DGPUCTL_BUILD_UNIT_TESTS="$unit_tests" -DGPUCTL_TORCH_TESTS=ON
start_ceph
step "Tests"
normal_rc=0
ctest --test-dir build --output-on-failure -j "$jobs" 2>&1 | tee "$log_dir/normal.log" \
  || normal_rc=${PIPESTATUS[0]}

echo
echo "test.sh: total $(elapsed "$started") (asan pass: $asan_time, normal pass: $(elapsed "$normal_start"))"
# CTest summaries last: a failed sanitizer pass's after the normal one, so
# the final lines never read "100% passed" when something failed.
sed -n '/tests passed,/,$p' "$log_dir/normal.log"
if [ "$asan_rc" -ne 0 ]; then
  echo
  echo "test.sh: the ASan+UBSan pass FAILED (details above):"
  sed -n '/tests passed,/,$p' "$log_dir/asan.log"
fi
if [ "$fuzz_rc" -ne 0 ]; then
  echo
  echo "test.sh: fuzzing FAILED (details above):"
  grep -E '^fuzz: .*(FAIL|failed)' "$log_dir/fuzz.log" || tail -n 5 "$log_dir/fuzz.log"
fi
for check in "${failed_checks[@]}"; do
  echo
  echo "test.sh: $check FAILED (details above)"
done
if [ "$asan_rc" -ne 0 ] || [ "$normal_rc" -ne 0 ] || [ "$fuzz_rc" -ne 0 ] || [ ${#failed_checks[@]} -ne 0 ]; then
  exit 1
fi
