#!/usr/bin/env bash
# Idle cost of libgpuctl.so: instructions (callgrind, deterministic) executed
# by a CPU-bound program that never calls gpuctl, run three ways in the same
# script: without the library, preloaded with a daemon present (attached,
# idle), and preloaded with no daemon (reconnecting with backoff).
#
# Usage: bench/idle_cost.sh [BUILD_DIR] [ITERATIONS]
set -euo pipefail
build=$(realpath "${1:-build}")
iterations=${2:-200000000}
lib=$build/lib/libgpuctl.so
prog=$build/bin/gpuctl_bench_cpu_bound
for f in "$lib" "$prog" "$build/bin/gpuctld" "$build/bin/gpuctl"; do
  [ -e "$f" ] || { echo "missing $f: build first" >&2; exit 2; }
done
command -v valgrind >/dev/null || { echo "valgrind is required" >&2; exit 2; }

work=$(mktemp -d)
daemon_pid=""
cleanup() { [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

instructions() {  # $1 = label, rest = env assignments; prints total Ir
  local out=$work/callgrind.$1
  shift
  env "$@" valgrind --tool=callgrind --callgrind-out-file="$out" "$prog" "$iterations" \
    >/dev/null 2>"$work/valgrind.log"
  awk '/^summary:/ {print $2}' "$out"
}

"$build/bin/gpuctld" --listen 127.0.0.1:0 --socket "$work/gpuctl.sock" --store "$work/store" \
  --ready-file "$work/ready" 2>"$work/gpuctld.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
[ -s "$work/ready" ] || { echo "gpuctld did not start" >&2; cat "$work/gpuctld.log" >&2; exit 1; }

base=$(instructions base)
with_daemon=$(instructions daemon LD_PRELOAD="$lib" GPUCTL_SOCKET="$work/gpuctl.sock")
# The preloaded run must really have attached, or the figure means nothing.
grep -q 'msg="process attached"' "$work/gpuctld.log" ||
  { echo "the preloaded program never attached to gpuctld" >&2; cat "$work/gpuctld.log" >&2; exit 1; }
kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true; daemon_pid=""
no_daemon=$(instructions nodaemon LD_PRELOAD="$lib" GPUCTL_SOCKET="$work/absent.sock")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", a / b }'; }
printf '%-32s %16s %10s\n' "run" "instructions" "ratio"
printf '%-32s %16s %10s\n' "no library" "$base" "1.000000"
printf '%-32s %16s %10s\n' "preloaded, daemon present" "$with_daemon" "$(ratio "$with_daemon" "$base")"
printf '%-32s %16s %10s\n' "preloaded, no daemon" "$no_daemon" "$(ratio "$no_daemon" "$base")"
