#!/usr/bin/env bash
# GPU validation of gpuctl on one real GPU (see docs/gpu-validation.md).
#
#   test/gpu/run.sh --prebuilt DIR [--out DIR] [options]
#   test/gpu/run.sh --build-dir DIR [--out DIR] [options]
#   test/gpu/run.sh [--out DIR] [options]          (builds with cmake first)
#
# Builds test/gpu/workload.cu with nvcc, starts a private gpuctld, traces the
# CUDA workload and a PyTorch training loop with the real gpuctl CLI, checks
# the stored traces, measures overhead and trigger latency, and writes
# results.json, summary.txt, run.log and sample traces into the output dir.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

usage() {
  cat <<'EOF'
Usage: test/gpu/run.sh [--prebuilt DIR | --build-dir DIR] [options]

Where gpuctl comes from (one of):
  --prebuilt DIR     binaries made elsewhere (test/gpu/bundle.sh): DIR/bin/gpuctld,
                     DIR/bin/gpuctl, DIR/lib/libgpuctl.so, and DIR/deps/ with the
                     shared libraries of gpuctld and gpuctl (used for those two only);
                     or that directory packed as a .tar.gz/.tar.xz archive
  --build-dir DIR    an existing build tree (bin/, lib/)
  (neither)          configure and build with cmake into WORK/build

Options:
  --out DIR          results (default: $OUT, else ./gpu-validation-out)
  --work DIR         scratch space (default: a new directory under /tmp)
  --parts LIST       workload,torch,latency (default: all)
  --python PY        the Python with PyTorch (default: python3)
  --cupti PATH       libcupti for NVTX_INJECTION64_PATH (default: searched in
                     $CUDA_HOME and the PyTorch wheel)
  --nvcc PATH        default: $CUDA_HOME/bin/nvcc, else nvcc on PATH
  --arch SM          nvcc -arch (default: sm_90)
  --timeout S        the whole run, build included, in seconds (default: 300)
  --triggers N       trigger latency samples (default: 20)
  --iterations N     steps of the PyTorch iteration window (default: 10)
  --overhead-steps N steps per overhead phase (default: 300)
  --dry-run          no GPU needed: the sample workload with the fake CUPTI
                     (DIR/lib/libcupti_fake.so, DIR/bin/gpuctl_sample_workload)
                     through the same daemon and CLI path; PyTorch skipped
  -h, --help         this text

Exit: 0 every check passed, 1 some check failed, 2 bad usage or missing files,
124 the whole run passed --timeout.
EOF
}

die() { echo "run.sh: $*" >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"; }
positive_int() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1: expected a positive integer, got '$2'"; }

prebuilt="" build_dir="" out="${OUT:-}" work="" parts="workload,torch,latency"
python="python3" cupti="" nvcc="" arch="sm_90" timeout_s=300 triggers=20
iterations=10 overhead_steps=300 dry_run=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --prebuilt) need_value "$@"; prebuilt="$2"; shift 2 ;;
    --build-dir) need_value "$@"; build_dir="$2"; shift 2 ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --parts) need_value "$@"; parts="$2"; shift 2 ;;
    --python) need_value "$@"; python="$2"; shift 2 ;;
    --cupti) need_value "$@"; cupti="$2"; shift 2 ;;
    --nvcc) need_value "$@"; nvcc="$2"; shift 2 ;;
    --arch) need_value "$@"; arch="$2"; shift 2 ;;
    --timeout) need_value "$@"; positive_int "$1" "$2"; timeout_s="$2"; shift 2 ;;
    --triggers) need_value "$@"; positive_int "$1" "$2"; triggers="$2"; shift 2 ;;
    --iterations) need_value "$@"; positive_int "$1" "$2"; iterations="$2"; shift 2 ;;
    --overhead-steps) need_value "$@"; positive_int "$1" "$2"; overhead_steps="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

[[ -n "$prebuilt" && -n "$build_dir" ]] && die "--prebuilt and --build-dir exclude each other"
[[ -z "$prebuilt" || -e "$prebuilt" ]] || die "--prebuilt $prebuilt: no such file or directory"
[[ -z "$build_dir" || -d "$build_dir" ]] || die "--build-dir $build_dir: no such directory"
IFS=, read -ra part_list <<<"$parts"
[[ ${#part_list[@]} -gt 0 ]] || die "--parts is empty"
for p in "${part_list[@]}"; do
  case "$p" in workload|torch|latency) ;; *) die "--parts: unknown part '$p' (workload, torch, latency)" ;; esac
done
[[ "$arch" =~ ^sm_[0-9]+a?$ ]] || die "--arch: expected sm_NN, got '$arch'"

started=$SECONDS
left() { local l=$((timeout_s - (SECONDS - started))); echo $((l > 1 ? l : 1)); }

out="${out:-$PWD/gpu-validation-out}"
mkdir -p "$out" || die "cannot create --out $out"
out="$(cd "$out" && pwd)"
if [[ -z "$work" ]]; then
  work="$(mktemp -d /tmp/gpuctl-gpu-XXXXXX)"
else
  mkdir -p "$work" || die "cannot create --work $work"
  work="$(cd "$work" && pwd)"
fi
log="$out/run.log"
: >"$log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$log" >&2; }

# ---- gpuctl binaries ---------------------------------------------------------
deps=""
if [[ -n "$prebuilt" && -f "$prebuilt" ]]; then
  mkdir -p "$work/prebuilt"
  tar -xaf "$prebuilt" -C "$work/prebuilt" || die "--prebuilt $prebuilt: cannot unpack"
  prebuilt="$work/prebuilt"
fi
if [[ -n "$prebuilt" ]]; then
  root="$(cd "$prebuilt" 2>/dev/null && pwd)" || die "--prebuilt $prebuilt: no such directory"
  [[ -d "$root/deps" ]] && deps="$root/deps"
elif [[ -n "$build_dir" ]]; then
  root="$(cd "$build_dir" 2>/dev/null && pwd)" || die "--build-dir $build_dir: no such directory"
else
  command -v cmake >/dev/null || die "cmake not found; pass --prebuilt DIR or --build-dir DIR"
  root="$work/build"
  say "building gpuctl with cmake into $root"
  targets=(gpuctld gpuctl libgpuctl)
  # The fake CUPTI of --dry-run is part of the test build (it needs GTest).
  tests=OFF
  if [[ $dry_run == 1 ]]; then targets+=(gpuctl_sample_workload cupti_fake); tests=ON; fi
  generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
  timeout "$(left)" cmake -S "$repo" -B "$root" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DGPUCTL_BUILD_TESTS=$tests -DGPUCTL_BUILD_UNIT_TESTS=OFF -DGPUCTL_BUILD_BENCH=OFF \
      >>"$log" 2>&1 || die "cmake configure failed (see $log)"
  timeout "$(left)" cmake --build "$root" --parallel "$(nproc)" --target "${targets[@]}" \
      >>"$log" 2>&1 || die "cmake build failed (see $log)"
fi
gpuctld="$root/bin/gpuctld" gpuctl="$root/bin/gpuctl" lib="$root/lib/libgpuctl.so"
for f in "$gpuctld" "$gpuctl" "$lib"; do [[ -f "$f" ]] || die "missing $f"; done
if [[ -n "$deps" && -f "$deps/ld-linux-x86-64.so.2" ]]; then
  # A bundle with its own glibc: start the daemon and the CLI through its
  # loader, whatever the host's glibc.
  mkdir -p "$work/bin"
  for b in gpuctld gpuctl; do
    printf '#!/bin/sh\nexec "%s" --library-path "%s" "%s" "$@"\n' \
      "$deps/ld-linux-x86-64.so.2" "$deps" "$root/bin/$b" >"$work/bin/$b"
    chmod +x "$work/bin/$b"
  done
  gpuctld="$work/bin/gpuctld" gpuctl="$work/bin/gpuctl" deps=""
fi
# Otherwise the daemon and the CLI find their libraries in deps/ through
# LD_LIBRARY_PATH; workloads never see it.
run_cli() { LD_LIBRARY_PATH="${deps}${deps:+:}${LD_LIBRARY_PATH:-}" "$@"; }
run_cli "$gpuctl" --version >>"$log" 2>&1 \
  || die "$gpuctl does not run here (missing shared libraries? see $log)"
run_cli "$gpuctld" --version >>"$log" 2>&1 \
  || die "$gpuctld does not run here (missing shared libraries? see $log)"

args=(--gpuctld "$gpuctld" --gpuctl "$gpuctl" --lib "$lib" --out "$out" --work "$work"
      --parts "$parts" --python "$python" --triggers "$triggers" --iterations "$iterations"
      --overhead-steps "$overhead_steps")
[[ -n "$deps" ]] && args+=(--deps-dir "$deps")

if [[ $dry_run == 1 ]]; then
  args+=(--dry-run --sample-workload "$root/bin/gpuctl_sample_workload"
         --fake-cupti "$root/lib/libcupti_fake.so")
  for f in "$root/bin/gpuctl_sample_workload" "$root/lib/libcupti_fake.so"; do
    [[ -f "$f" ]] || die "--dry-run needs $f"
  done
else
  # ---- the CUDA workload ---------------------------------------------------
  cuda_home="${CUDA_HOME:-/usr/local/cuda}"
  if [[ -z "$nvcc" ]]; then
    if [[ -x "$cuda_home/bin/nvcc" ]]; then nvcc="$cuda_home/bin/nvcc"
    else nvcc="$(command -v nvcc || true)"; fi
  fi
  [[ -n "$nvcc" && -x "$nvcc" ]] || die "nvcc not found (set CUDA_HOME or pass --nvcc)"
  args+=(--nvcc "$nvcc")
  if [[ ",$parts," == *",workload,"* ]]; then
    say "compiling test/gpu/workload.cu ($arch)"
    timeout "$(left)" "$nvcc" -O2 -std=c++17 -arch="$arch" -lineinfo \
        -o "$work/gpuctl_gpu_workload" "$here/workload.cu" -ldl >>"$log" 2>&1 \
      || die "nvcc failed (see $log)"
    args+=(--workload "$work/gpuctl_gpu_workload")
  fi
  # ---- a CUPTI for NVTX injection ------------------------------------------
  if [[ -z "$cupti" ]]; then
    site="$(timeout 60 "$python" -c \
      'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null || true)"
    for c in "$cuda_home"/extras/CUPTI/lib64/libcupti.so.1[0-9] \
             "$cuda_home"/lib64/libcupti.so.1[0-9] \
             "$site"/nvidia/cu13/lib/libcupti.so.13 \
             "$site"/nvidia/cuda_cupti/lib/libcupti.so.1[0-9]; do
      if [[ -f "$c" ]]; then cupti="$c"; break; fi
    done
  fi
  if [[ -n "$cupti" ]]; then
    [[ -f "$cupti" ]] || die "--cupti $cupti: no such file"
    args+=(--cupti "$cupti")
  else
    say "no libcupti found for NVTX injection: NVTX ranges are not checked"
  fi
fi

remaining=$(left)
[[ $remaining -gt 30 ]] || { say "no time left after the build"; exit 124; }
say "validating (at most ${remaining}s); work dir $work"
set +e
timeout --signal=TERM --kill-after=15 "$remaining" \
  "$python" "$here/validate.py" "${args[@]}" --deadline-s $((remaining - 20))
code=$?
set -e
if [[ $code == 124 || $code == 137 ]]; then
  say "the run passed its time limit (--timeout $timeout_s)"
  code=124
fi
say "results in $out (exit $code)"
exit $code
