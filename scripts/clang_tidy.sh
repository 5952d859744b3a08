#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy at the repo root) on the project's .cc files
# changed since the merge base with main, plus a fixed set of core files,
# and fails on any warning. Reads the compile commands of a non-unity
# CMake build (a unity build's name no source file); without one it
# configures BUILD_DIR with Clang, and it makes the generated protobuf
# headers there (protoc only, no compiling).
#
#   ./scripts/clang_tidy.sh [BUILD_DIR]   default: build-tidy
#   GPUCTL_JOBS=N                          parallel clang-tidy runs (default: 2)
#   GPUCTL_TIDY_BASE=REV                   compare against REV instead
set -euo pipefail
cd "$(dirname "$0")/.."

build="${1:-build-tidy}"
jobs="${GPUCTL_JOBS:-2}"
db="$build/compile_commands.json"
if [ ! -f "$db" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_UNITY_BUILD=OFF -DGPUCTL_BUILD_BENCH=ON >/dev/null
fi
if grep -q '"file": *"[^"]*unity_[0-9]*_cxx\.cxx"' "$db"; then
  echo "clang_tidy.sh: $build is a unity build; its database names no source file" >&2
  exit 2
fi
tidy="$(command -v clang-tidy-14 || command -v clang-tidy || true)"
if [ -z "$tidy" ]; then
  echo "clang_tidy.sh: clang-tidy not found (apt-get install clang-tidy-14)" >&2
  exit 2
fi
# The generated headers: protobuf's, and the client library's IPC codec
# (which builds its small generator first).
mapfile -t generated < <(ninja -C "$build" -t targets all |
  sed -n 's/^\(proto\/[^:]*\.pb\.h\|client_lib\/src\/wire\/gen\/[^:]*\.h\): .*/\1/p')
ninja -C "$build" "${generated[@]}" >/dev/null

# Always checked: the session core, its transports' adapters and the
# client library's threads. A file moved elsewhere is found by its name.
core_files=(
  daemon/core/daemon_core.cc
  daemon/core/registry.cc
  daemon/core/trace_session.cc
  daemon/core/trace_control.cc
  daemon/store/store_index.cc
  daemon/ipc/ipc_server.cc
  daemon/ipc/ipc_server_payloads.cc
  daemon/rpc/grpc_service.cc
  daemon/common/event_loop.cc
  daemon/common/thread_pool_executor.cc
  client_lib/src/agent.cc
  client_lib/src/capture_session.cc
  client_lib/src/ipc_client.cc
  client_lib/src/host_source.cc
  cli/trace_fanout.cc
)

files=()
for f in "${core_files[@]}"; do
  if [ ! -f "$f" ]; then
    moved="$(git ls-files -- "*/$(basename "$f")" | head -n 1)"
    if [ -z "$moved" ]; then
      echo "clang_tidy.sh: $f is gone; update core_files" >&2
      exit 2
    fi
    f="$moved"
  fi
  files+=("$f")
done

base="${GPUCTL_TIDY_BASE:-}"
if [ -z "$base" ]; then
  for ref in origin/main main; do
    if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
      base="$(git merge-base HEAD "$ref")"
      break
    fi
  done
fi
# On main itself: the last commit.
if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
  base="$(git rev-parse HEAD~1)"
fi
# Committed and uncommitted changes alike; deleted files drop out.
while IFS= read -r f; do
  [ -f "$f" ] && files+=("$f")
done < <(git diff --name-only --diff-filter=d "$base" -- \
  'daemon/*.cc' 'client_lib/*.cc' 'cli/*.cc' 'test/*.cc' 'bench/*.cc')

# Only what this build compiles (CUPTI sources need its headers, fuzz
# targets a fuzzing build).
root="$PWD"
checked=()
skipped=()
while IFS= read -r f; do
  if grep -qF "\"$root/$f\"" "$db"; then checked+=("$f"); else skipped+=("$f"); fi
done < <(printf '%s\n' "${files[@]}" | sort -u)
if [ "${#skipped[@]}" -gt 0 ]; then
  echo "clang_tidy.sh: not in $db, skipped: ${skipped[*]}"
fi

log_dir="$(mktemp -d "${TMPDIR:-/tmp}/gpuctl-tidy.XXXXXX")"
trap 'rm -rf "$log_dir"' EXIT
started=$(date +%s)
echo "clang_tidy.sh: ${#checked[@]} files (since $(git rev-parse --short "$base")), $jobs at a time"
rc=0
# One log per file: parallel runs would interleave their reports.
printf '%s\n' "${checked[@]}" | xargs -P "$jobs" -I{} sh -c \
  'log="$4/$(echo "$3" | tr / _).log"
   "$1" -p "$2" --quiet "$3" >"$log" 2>&1 ||
     { echo "clang-tidy exited $? on $3" >>"$log"; exit 1; }' \
  _ "$tidy" "$build" {} "$log_dir" \
  || rc=$?
failed=0
for log in "$log_dir"/*.log; do
  # Anything clang-tidy reports (WarningsAsErrors turns warnings into
  # errors), but not its count of suppressed warnings from other headers.
  if grep -qE '(warning|error):|^clang-tidy exited' "$log"; then
    grep -vE '^[0-9]+ warnings? generated\.$|^Suppressed [0-9]+ warnings|^Use -(header-filter|system-headers)' \
      "$log"
    failed=$((failed + 1))
  fi
done
echo "clang_tidy.sh: $(( $(date +%s) - started ))s, ${#checked[@]} files, $failed with findings"
if [ "$failed" -ne 0 ] || [ "$rc" -ne 0 ]; then
  exit 1
fi
