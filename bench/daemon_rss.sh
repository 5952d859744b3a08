#!/usr/bin/env bash
# Resident memory of an idle gpuctld with 0 and with N attached processes
# (each a `sleep` with libgpuctl.so preloaded), sampled several times.
#
# Usage: bench/daemon_rss.sh [BUILD_DIR] [N]
set -euo pipefail
build=$(realpath "${1:-build}")
count=${2:-100}
work=$(mktemp -d)
pids=()
daemon_pid=""
cleanup() {
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
attached() {
  "$build/bin/gpuctl" status --host "$(cat "$work/ready")" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("attachedProcesses", 0))'
}
wait_attached() {  # $1 = expected count
  for _ in $(seq 300); do [ "$(attached)" -ge "$1" ] && return 0; sleep 0.1; done
  echo "only $(attached) of $1 processes attached" >&2; return 1
}
samples() {  # prints min/median/max of 5 samples, 200 ms apart
  local s=()
  for _ in 1 2 3 4 5; do s+=("$(rss_kib "$daemon_pid")"); sleep 0.2; done
  printf '%s\n' "${s[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%d %d %d", a[1], a[3], a[NR]}'
}

"$build/bin/gpuctld" --listen 127.0.0.1:0 --socket "$work/gpuctl.sock" --store "$work/store" \
  --ready-file "$work/ready" 2>"$work/gpuctld.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
[ -s "$work/ready" ] || { echo "gpuctld did not start" >&2; exit 1; }
sleep 1
read -r idle_min idle_med idle_max <<<"$(samples)"

for _ in $(seq "$count"); do
  LD_PRELOAD="$build/lib/libgpuctl.so" GPUCTL_SOCKET="$work/gpuctl.sock" GPUCTL_JOB_ID=bench \
    sleep 600 &
  pids+=($!)
done
wait_attached "$count"
sleep 1
read -r full_min full_med full_max <<<"$(samples)"

printf '%-28s %10s %10s %10s\n' "gpuctld RSS (KiB)" min median max
printf '%-28s %10s %10s %10s\n' "0 attached" "$idle_min" "$idle_med" "$idle_max"
printf '%-28s %10s %10s %10s\n' "$count attached" "$full_min" "$full_med" "$full_max"
awk -v a="$full_med" -v b="$idle_med" -v n="$count" \
  'BEGIN { printf "per attached process: %.1f KiB\n", (a - b) / n }'
