#!/usr/bin/env bash
# Installs everything gpuctl needs to build and test on Debian 12:
# Debian packages (only those missing), Ceph for the S3 tests
# (scripts/ceph/install.sh) and a Python virtual environment (.venv) with
# the test-side consumers from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev zlib1g-dev libcurl4-openssl-dev libssl-dev libxml2-dev
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev
  clang libclang-rt-14-dev valgrind binutils
  python3 python3-venv
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Ceph (mon, osd, radosgw) for the tests against a real S3 gateway
# (scripts/ceph/start.sh).
./scripts/ceph/install.sh

if [ -n "${GPUCTL_SKIP_VENV:-}" ]; then
  exit 0
fi
if [ ! -x .venv/bin/pytest ] || ! cmp -s scripts/requirements.txt .venv/.requirements; then
  echo "install_deps: preparing .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
  cp scripts/requirements.txt .venv/.requirements
fi
