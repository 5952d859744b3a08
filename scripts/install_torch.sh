#!/usr/bin/env bash
# Installs PyTorch from PyPI into its own virtual environment, outside the
# clone, for the kineto bridge's end-to-end tests (test/e2e/torch/). The
# environment is keyed by the torch version, so it is downloaded once per
# machine (about 5 GB) and every clone reuses it; .venv-torch in the clone is
# a link to it. Prints the environment's path on its last line.
#
#   GPUCTL_TORCH_VERSION=2.15.0   the version installed (default below)
#   GPUCTL_CACHE_DIR=DIR          where environments live (~/.cache/gpuctl)
set -euo pipefail
cd "$(dirname "$0")/.."

version="${GPUCTL_TORCH_VERSION:-2.15.0}"
cache_root="${GPUCTL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuctl}"
venv="$cache_root/torch-$version"
# The CUDA build with its NVIDIA wheels unpacks to about 5 GB, and pip keeps
# the downloads in its cache while installing.
need_gib=12

if [ ! -f "$venv/.complete" ]; then
  mkdir -p "$cache_root"
  free_gib=$(( $(df --output=avail -k "$cache_root" | tail -n 1) / 1024 / 1024 ))
  if [ "$free_gib" -lt "$need_gib" ]; then
    echo "install_torch: $cache_root has ${free_gib} GiB free; torch $version needs about ${need_gib} GiB to install" >&2
    exit 1
  fi
  echo "install_torch: preparing $venv (torch $version, about 5 GB)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir \
    "torch==$version" "numpy<3" >&2
  "$venv/bin/python" -c "import torch; print('install_torch: torch', torch.__version__)" >&2
  touch "$venv/.complete"
fi
if [ "$(readlink .venv-torch 2>/dev/null)" != "$venv" ]; then
  rm -rf .venv-torch
  ln -s "$venv" .venv-torch
fi
echo "$venv"
