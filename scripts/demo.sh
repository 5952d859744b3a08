#!/usr/bin/env bash
# gpuctl in one command: builds the daemon, the CLI, the client library and a
# sample training loop, starts a private gpuctld, attaches two ranks of a job
# named "demo" with LD_PRELOAD, traces them for 2 seconds and shows where the
# trace is and how to open it. Everything runs on temporary paths and is
# stopped on exit; the downloaded trace is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

build="${GPUCTL_DEMO_BUILD_DIR:-build}"
jobs="${GPUCTL_JOBS:-2}"

if [ -t 1 ]; then
  say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
else
  say() { printf '\n==> %s\n' "$*"; }
fi

./scripts/install_deps.sh

say "Building gpuctld, gpuctl, libgpuctl.so and the sample workload ($build/)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j "$jobs" gpuctld gpuctl libgpuctl gpuctl_sample_workload
bin="$repo/$build/bin"
lib="$repo/$build/lib/libgpuctl.so"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/gpuctl-demo.XXXXXX")"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  # Keep the downloaded trace, the daemon's store and logs; drop the rest.
  rm -f "$tmp/gpuctl.sock" "$tmp/ready"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local what="$1" seconds="$2"; shift 2
  local deadline=$(( $(date +%s) + seconds ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "demo: timed out waiting for $what" >&2
      return 1
    fi
    sleep 0.1
  done
}

say "Starting gpuctld (socket $tmp/gpuctl.sock, store $tmp/store)"
"$bin/gpuctld" --listen 127.0.0.1:0 --socket "$tmp/gpuctl.sock" --store "$tmp/store" \
  --ready-file "$tmp/ready" 2>"$tmp/gpuctld.log" &
pids+=($!)
daemon_pid=$!
daemon_up() { kill -0 "$daemon_pid" && [ -s "$tmp/ready" ]; }
if ! wait_for "gpuctld to start" 30 daemon_up; then
  cat "$tmp/gpuctld.log" >&2
  exit 1
fi
host="$(cat "$tmp/ready")"
echo "gpuctld listening on $host"

rank_pids=()
say "Starting two ranks of job \"demo\" with LD_PRELOAD=$lib"
for rank in 0 1; do
  GPUCTL_SOCKET="$tmp/gpuctl.sock" GPUCTL_JOB_ID=demo RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 \
    LD_PRELOAD="$lib" "$bin/gpuctl_sample_workload" --steps 100000 --step-ms 10 \
    >"$tmp/rank$rank.log" 2>&1 &
  pids+=($!)
  rank_pids+=($!)
done
both_attached() {
  local out pid
  out="$("$bin/gpuctl" ps --host "$host")" || return 1
  for pid in "${rank_pids[@]}"; do
    grep -qw "$pid" <<<"$out" || return 1
  done
}
wait_for "both ranks to attach" 30 both_attached

say "gpuctl ps --host $host"
"$bin/gpuctl" ps --host "$host"

out_dir="$tmp/gpuctl-traces"
say "gpuctl trace --job demo --duration 2s --host $host -o $out_dir"
rc=0
"$bin/gpuctl" trace --job demo --duration 2s --host "$host" -o "$out_dir" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "demo: gpuctl trace exited $rc; daemon log:" >&2
  cat "$tmp/gpuctld.log" >&2
  exit 1
fi

trace_dir="$(find "$out_dir" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
trace_id="$(basename "$trace_dir")"
say "Trace $trace_id"
echo "Stored by the daemon in: $tmp/store (gpuctl traces / gpuctl get $trace_id)"
echo "Downloaded to:           $trace_dir"
ls -l "$trace_dir"
cat <<EOF

Open a trace: https://ui.perfetto.dev -> "Open trace file" -> pick one of
  $(find "$trace_dir" -name '*.json.gz' | sort | head -n 1)
or chrome://tracing -> "Load" (both read .json.gz as is).

EOF
echo "Everything else the demo wrote (daemon log, workload logs) is under $tmp."
say "Stopping gpuctld and the workloads"
