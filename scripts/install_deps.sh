#!/usr/bin/env bash
# Installs everything gpuctl needs to build and test on Debian 12:
# Debian packages (only those missing), Ceph for the S3 tests
# (scripts/ceph/install.sh), a Python virtual environment with the
# test-side consumers from PyPI (under ~/.cache/gpuctl/, linked as .venv)
# and PyTorch in an environment of its own for the kineto bridge's tests
# (scripts/install_torch.sh, linked as .venv-torch; GPUCTL_SKIP_TORCH=1
# leaves it out).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev zlib1g-dev libdeflate-dev libisal-dev libcurl4-openssl-dev libssl-dev libxml2-dev
  libcli11-dev nlohmann-json3-dev libsimdjson-dev libyaml-cpp-dev
  libdw-dev libelf-dev  # daemon/hostctx: elfutils' libdwfl symbolizes sampled stacks
  nodejs  # daemon/hostctx tests: a real JIT runtime writing a perf map (--perf-basic-prof)
  prometheus-cpp-dev prometheus  # daemon/metrics; promtool and a real server for its e2e test
  clang clang-tidy clang-format libclang-rt-14-dev valgrind binutils
  python3 python3-venv
  tmux  # the live progress e2e test (tmux capture-pane)
  chromium chromium-driver fonts-dejavu-core  # the HTML report's test (test/e2e/test_analyze_html.py): headless Chromium via selenium
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
# The environment lives outside the clone, keyed by the requirements'
# hash, so a fresh clone reuses it and a changed requirements file gets a
# new one; .venv in the clone is a link to it.
cache_root="${GPUCTL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuctl}"
venv="$cache_root/venv-$(sha256sum scripts/requirements.txt | cut -c1-16)"
if [ ! -f "$venv/.complete" ]; then
  echo "install_deps: preparing $venv"
  rm -rf "$venv"
  mkdir -p "$cache_root"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/requirements.txt
  touch "$venv/.complete"
fi
if [ "$(readlink .venv 2>/dev/null)" != "$venv" ]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi

if [ -z "${GPUCTL_SKIP_TORCH:-}" ]; then
  ./scripts/install_torch.sh >/dev/null
fi
