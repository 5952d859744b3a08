#!/usr/bin/env bash
# Packs gpuctl's built binaries for test/gpu/run.sh --prebuilt on a GPU host
# that cannot build gpuctl (no gRPC, protobuf or Abseil there).
#
#   test/gpu/bundle.sh BUILD_DIR DEST
#
# DEST is a directory, or an archive (.tar.gz, .tar.xz) of one.
# DEST/bin/{gpuctld,gpuctl,gpuctl_sample_workload}, DEST/lib/{libgpuctl.so,
# libcupti_fake.so} (the last two of each only when built; they serve
# --dry-run), and DEST/deps/ with every shared library gpuctld and gpuctl
# load, glibc and its loader included: run.sh starts the two through that
# loader, so they run on a host with an older glibc. libgpuctl.so and the
# sample workload use the host's glibc (the version they need is printed).
# Debug info is stripped from the copies.
set -euo pipefail

usage() { echo "usage: $0 BUILD_DIR DEST" >&2; exit 2; }
[[ $# == 2 ]] || usage
[[ "$1" == -h || "$1" == --help ]] && usage
build="$1" dest="$2" archive=""
if [[ "$dest" == *.tar.gz || "$dest" == *.tar.xz ]]; then
  archive="$(realpath -m "$dest")"
  dest="$(mktemp -d)"
  trap 'rm -rf "$dest"' EXIT
fi
for f in bin/gpuctld bin/gpuctl lib/libgpuctl.so; do
  [[ -f "$build/$f" ]] || { echo "bundle.sh: missing $build/$f (build gpuctld gpuctl libgpuctl)" >&2; exit 2; }
done
mkdir -p "$dest/bin" "$dest/lib" "$dest/deps"

copy() {  # copy SRC DIR: a stripped copy
  install -m 0755 "$1" "$2/"
  strip --strip-debug "$2/$(basename "$1")"
}
copy "$build/bin/gpuctld" "$dest/bin"
copy "$build/bin/gpuctl" "$dest/bin"
copy "$build/lib/libgpuctl.so" "$dest/lib"
[[ -f "$build/bin/gpuctl_sample_workload" ]] && copy "$build/bin/gpuctl_sample_workload" "$dest/bin"
[[ -f "$build/lib/libcupti_fake.so" ]] && copy "$build/lib/libcupti_fake.so" "$dest/lib"

ldd "$build/bin/gpuctld" "$build/bin/gpuctl" |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3} $1 ~ /^\/.*ld-linux/ {print "ld-linux-x86-64.so.2", $1}' |
  sort -u | while read -r name path; do
    [[ -f "$dest/deps/$name" ]] || { cp -L "$path" "$dest/deps/$name"; strip --strip-debug "$dest/deps/$name"; }
  done
[[ -f "$dest/deps/ld-linux-x86-64.so.2" ]] || { echo "bundle.sh: no ld-linux-x86-64.so.2 found" >&2; exit 1; }
if ldd "$build/bin/gpuctld" "$build/bin/gpuctl" | grep -q "not found"; then
  echo "bundle.sh: some libraries of gpuctld/gpuctl were not found here" >&2; exit 1
fi

need=$(objdump -T "$dest"/lib/* "$dest"/bin/gpuctl_sample_workload 2>/dev/null |
  grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
if [[ -n "$archive" ]]; then
  tar -caf "$archive" -C "$dest" .
  where="$archive ($(du -h "$archive" | cut -f1))"
else
  where="$dest ($(du -sh "$dest" | cut -f1))"
fi
echo "bundled into $where: $(find "$dest/deps" -type f | wc -l) libraries;" \
     "libgpuctl.so needs ${need:-an unknown glibc} or newer on the GPU host"
