#!/usr/bin/env bash
# Measures what gpuctld uses, for the resource requests of the Kubernetes
# manifests (docs/kubernetes.md, "Resource requests"): resident memory and
# CPU time idle, with N attached processes, and through one trace of all of
# them; the processes are sleep(1) with the library preloaded, so that
# they leave the machine's CPUs to the daemon. CPU is read as CPU time from /proc/PID/stat, so a busy machine
# changes the wall time it takes, not the figure.
#
#   test/deploy/measure_resources.sh [BUILD_DIR] [PROCESSES] [SECONDS]
set -euo pipefail

build=${1:-build}
processes=${2:-64}
seconds=${3:-30}
bin="$build/bin"
work=$(mktemp -d /tmp/gpuctl-measure-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/gpuctld" --listen 127.0.0.1:0 --socket "$work/gpuctl.sock" --store "$work/traces" \
  --ready-file "$work/ready" --host-name measure --log-level warning &
daemon=$!
pids+=("$daemon")
for _ in $(seq 600); do [[ -s "$work/ready" ]] && break; sleep 0.1; done
address=$(cat "$work/ready")

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$daemon/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$daemon/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$daemon/status"; }
# CPU over `seconds` of wall time, in millicores.
millicores_over() {
  local before after
  before=$(cpu_ticks)
  sleep "$1"
  after=$(cpu_ticks)
  echo $(((after - before) * 1000 / ticks / $1))
}

echo "idle: rss $(rss_kib) KiB, cpu $(millicores_over "$seconds")m over ${seconds}s"

for rank in $(seq 0 $((processes - 1))); do
  LD_PRELOAD="$build/lib/libgpuctl.so" GPUCTL_SOCKET="$work/gpuctl.sock" GPUCTL_JOB_ID=measure \
    RANK=$rank nice sleep 100000 >/dev/null 2>&1 &
  pids+=("$!")
done
for _ in $(seq 1200); do
  attached=$("$bin/gpuctl" ps --host "$address" 2>/dev/null | grep -c measure || true)
  [[ "$attached" -ge "$processes" ]] && break
  sleep 0.1
done
echo "attached: $attached processes"
echo "attached, idle: rss $(rss_kib) KiB, cpu $(millicores_over "$seconds")m over ${seconds}s"

before=$(cpu_ticks)
start=$(date +%s)
"$bin/gpuctl" trace --host "$address" --job measure --duration 5s --output "$work/out" >/dev/null 2>&1
elapsed=$(($(date +%s) - start))
after=$(cpu_ticks)
echo "one 5s trace of $processes processes: cpu $(((after - before) * 1000 / ticks))ms" \
  "over ${elapsed}s, peak rss $(hwm_kib) KiB"
