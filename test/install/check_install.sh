#!/usr/bin/env bash
# Installs a build into a scratch prefix (cmake --install, as the README
# says) and checks what a host needs is there and runs from there: the two
# binaries, the library (preloadable), the header, the systemd unit and
# sysusers file, and the Python package finding the installed library.
#
#   test/install/check_install.sh BUILD_DIR
set -euo pipefail
build="${1:?usage: check_install.sh BUILD_DIR}"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null

fail() { echo "install: $*" >&2; exit 1; }
for f in bin/gpuctld bin/gpuctl lib/gpuctl/libgpuctl.so include/gpuctl/gpuctl.h \
         lib/systemd/system/gpuctld.service lib/sysusers.d/gpuctl.conf \
         lib/python3/dist-packages/gpuctl/__init__.py; do
  [ -e "$prefix/$f" ] || fail "missing $f"
done
# libdir may be lib/ or lib/<multiarch>/ depending on the prefix; the README
# names lib/gpuctl/ for a /usr/local prefix, which the check above covers.
"$prefix/bin/gpuctl" --help >/dev/null || fail "installed gpuctl --help failed"
"$prefix/bin/gpuctld" --help >/dev/null || fail "installed gpuctld --help failed"
# Preloaded into a process with no daemon around: it loads, stays silent
# for a short-lived process, and the process exits normally.
out="$(GPUCTL_SOCKET="$prefix/none.sock" LD_PRELOAD="$prefix/lib/gpuctl/libgpuctl.so" \
       /bin/echo preloaded 2>&1)"
[ "$out" = "preloaded" ] || fail "preloaded echo printed: $out"
grep -q '^g gpuctl' "$prefix/lib/sysusers.d/gpuctl.conf" || fail "sysusers file has no gpuctl group"
# The package imports from the install and binds the installed library.
GPUCTL_LIBRARY="$prefix/lib/gpuctl/libgpuctl.so" GPUCTL_SOCKET="$prefix/none.sock" \
  PYTHONPATH="$prefix/lib/python3/dist-packages" PYTHONDONTWRITEBYTECODE=1 \
  python3 -c 'import gpuctl, sys; sys.exit(0 if gpuctl.available() else 3)' \
  || fail "the installed Python package did not bind the installed library"
echo "install: every file in place under a scratch prefix; binaries, library and package run"
