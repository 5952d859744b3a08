#!/usr/bin/env bash
# Builds every libFuzzer target with Clang (-fsanitize=fuzzer,address,undefined)
# and runs each for a bounded time on a scratch copy of its seed corpus.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 20; CI: 10)
#
# Prints one line per target; exits non-zero if any target crashed, leaked or
# broke an invariant, after printing the crashing input as base64 (the file
# itself stays under the build directory, see below). Environment:
#   GPUCTL_FUZZ_BUILD  build directory        (default: build-fuzz-clang in the repo)
#   GPUCTL_FUZZ_ONLY   run only these targets (space-separated short names)
#   GPUCTL_JOBS        parallel build jobs    (default 2)
#   GPUCTL_FUZZ_ARGS   extra libFuzzer flags  (e.g. -jobs=4)
# Longer campaigns: docs/testing.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET] (a positive whole number of seconds)" >&2
  exit 2
fi
build="${GPUCTL_FUZZ_BUILD:-$root/build-fuzz-clang}"
jobs="${GPUCTL_JOBS:-2}"
cc="$(command -v clang || true)"
cxx="$(command -v clang++ || true)"
if [[ -z "$cc" || -z "$cxx" ]]; then
  for v in 19 18 17 16 15 14; do
    if command -v "clang++-$v" >/dev/null; then cc="clang-$v" cxx="clang++-$v"; break; fi
  done
fi
if [[ -z "$cxx" ]]; then
  echo "fuzz: clang++ not found (apt-get install clang)" >&2
  exit 2
fi

# short name -> "binary corpus-dir"
declare -A targets=(
  [config]="gpuctl_config_fuzzer config"
  [records]="gpuctl_record_reader_fuzzer records"
  [wire]="wire_decode_fuzz wire"
  [ipc_daemon]="gpuctl_ipc_message_fuzzer ipc_daemon"
  [step_page]="gpuctl_step_page_fuzzer step_page"
  [kineto]="gpuctl_kineto_protocol_fuzzer kineto"
  [trace_names]="gpuctl_trace_names_fuzzer trace_names"
  [download_paths]="gpuctl_download_paths_fuzzer download_paths"
  [kineto_trace]="gpuctl_kineto_trace_fuzzer kineto"
  [analysis]="gpuctl_analysis_fuzzer analysis"
  [hostctx]="gpuctl_hostctx_perf_input_fuzzer hostctx"
)
read -r -a names <<<"${GPUCTL_FUZZ_ONLY:-config records wire ipc_daemon step_page kineto trace_names download_paths kineto_trace analysis hostctx}"
binaries=()
for n in "${names[@]}"; do
  [[ -n "${targets[$n]:-}" ]] || { echo "fuzz: unknown target '$n'" >&2; exit 2; }
  binaries+=("${targets[$n]%% *}")
done

# Everything, libraries included, carries coverage instrumentation and the
# sanitizers; only the fuzz binaries and what they link are built. The tests
# are not configured (no GTest, no Python environment needed). -O1 with line
# tables only is the usual libFuzzer build and compiles much faster than
# -O2 -g; NDEBUG stays off so that assert() checks too. Unity batches take
# less CPU than one compile per file here too.
start=$(date +%s)
mkdir -p "$build"
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
opt="-O1 -gline-tables-only"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
  -DGPUCTL_BUILD_TESTS=OFF -DGPUCTL_BUILD_FUZZERS=ON \
  >"$build/fuzz-cmake.log" 2>&1 || { cat "$build/fuzz-cmake.log"; exit 2; }
if ! ninja -C "$build" -j"$jobs" "${binaries[@]}" >"$build/fuzz-ninja.log" 2>&1; then
  tail -n 40 "$build/fuzz-ninja.log"
  echo "fuzz: build failed (log: $build/fuzz-ninja.log)" >&2
  exit 2
fi
built=$(date +%s)
echo "fuzz: built ${#binaries[@]} targets in $((built - start))s"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
status=0
for n in "${names[@]}"; do
  read -r bin corpus <<<"${targets[$n]}"
  work="$build/fuzz-runs/$n"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  # New inputs land in the scratch copy, never in the committed corpus.
  cp "$root/test/fuzz_corpus/$corpus/." "$work/corpus/" -R
  log="$work/log"
  rc=0
  "$build/bin/$bin" "$work/corpus" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$work/artifacts/" ${GPUCTL_FUZZ_ARGS:-} >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1 || true)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n1 | cut -d' ' -f2 || true)
  files=$(find "$work/corpus" -type f | wc -l)
  crash=$(find "$work/artifacts" -type f | head -n1)
  if [[ $rc -eq 0 && -z "$crash" ]]; then
    printf 'fuzz: %-14s ok    %9s runs  cov %-6s corpus %s\n' "$n" "${runs:-?}" "${cov:-?}" "$files"
  else
    status=1
    printf 'fuzz: %-14s FAIL  exit %s after %s runs (log: %s)\n' "$n" "$rc" "${runs:-?}" "$log"
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|deadly signal' \
      "$log" | sed 's/^/      /' || true
    if [[ -n "$crash" ]]; then
      echo "      input: $crash ($(wc -c <"$crash") bytes), base64:"
      base64 -w 76 "$crash" | head -n 40 | sed 's/^/      /'
      echo "      reproduce: $build/bin/$bin $crash"
    else
      tail -n 20 "$log" | sed 's/^/      /'
    fi
  fi
done
echo "fuzz: ${#names[@]} targets, ${seconds}s each, total $(($(date +%s) - start))s"
exit $status
