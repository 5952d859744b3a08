#!/usr/bin/env bash
# gpuctld's wake-ups and CPU time over a minute with one attached sample
# workload stepping every 20 ms and one rule:
#   anomaly  an anomaly rule: the cost of reading the step counters (and
#            their recent durations) once a second;
#   time     an hourly time rule with no capture due: the daemon should
#            wake only at slot boundaries (none in a minute that crosses
#            none).
#
# Usage: bench/anomaly_wakeups.sh [BUILD_DIR] [SECONDS] [anomaly|time]
set -euo pipefail
build=$(realpath "${1:-build}")
seconds=${2:-60}
kind=${3:-anomaly}
for f in "$build/bin/gpuctld" "$build/bin/gpuctl" "$build/bin/gpuctl_sample_workload" \
  "$build/lib/libgpuctl.so"; do
  [ -e "$f" ] || { echo "missing $f: build first" >&2; exit 2; }
done
work=$(mktemp -d)
daemon_pid=""
workload_pid=""
cleanup() {
  [ -n "$workload_pid" ] && kill "$workload_pid" 2>/dev/null
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

case "$kind" in
  anomaly)
    rule='    - name: stalls
      selector: {job: "bench"}
      window: 3s
      min_step: 20
      anomaly: {slow_factor: 20, cooldown: 10m}' ;;
  time)
    rule='    - name: hourly
      selector: {job: "bench"}
      period: 1h
      window: 10s
      probability: 0.25' ;;
  *) echo "rule kind: anomaly or time, not $kind" >&2; exit 2 ;;
esac
printf 'schedule:\n  seed: bench\n  max_duty_cycle: 0.5\n  rules:\n%s\n' "$rule" >"$work/gpuctld.yaml"
"$build/bin/gpuctld" --config "$work/gpuctld.yaml" --listen 127.0.0.1:0 \
  --socket "$work/gpuctl.sock" --store "$work/store" --ready-file "$work/ready" \
  2>"$work/gpuctld.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
[ -s "$work/ready" ] || { echo "gpuctld did not start" >&2; cat "$work/gpuctld.log" >&2; exit 1; }
address=$(cat "$work/ready")
LD_PRELOAD="$build/lib/libgpuctl.so" GPUCTL_SOCKET="$work/gpuctl.sock" GPUCTL_JOB_ID=bench \
  nice "$build/bin/gpuctl_sample_workload" --step-ms 20 >/dev/null 2>&1 &
workload_pid=$!
sleep 5
grep -q 'msg="process attached"' "$work/gpuctld.log" ||
  { echo "the workload never attached" >&2; cat "$work/gpuctld.log" >&2; exit 1; }

wakeups() {
  "$build/bin/gpuctl" schedule --host "$address" --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["hosts"][0]["schedule"]["wakeups"])'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$daemon_pid/stat"; }
w0=$(wakeups)
c0=$(cpu_ticks)
sleep "$seconds"
c1=$(cpu_ticks)
w1=$(wakeups)
ticks=$(getconf CLK_TCK)
echo "seconds: $seconds"
echo "wake-ups: $((w1 - w0))"
echo "daemon CPU: $(awk -v t="$((c1 - c0))" -v hz="$ticks" 'BEGIN { printf "%.0f ms", t * 1000 / hz }')"
"$build/bin/gpuctl" schedule --host "$address" | tail -n 2
