#!/usr/bin/env bash
# Installs the Debian 12 packages that scripts/ceph/start.sh needs to run a
# single-node Ceph cluster with an S3 gateway (ceph-mon, ceph-osd, radosgw
# and, through them, ceph-common for the ceph/ceph-authtool/monmaptool
# tools). Installs nothing when everything is already there, so it is cheap
# to call before every start.
set -euo pipefail

packages=(ceph-mon ceph-osd radosgw ceph-common)
tools=(ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "ceph/install: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  # The packages' maintainer scripts try to start system services; in a
  # container without an init system that is refused, which is harmless
  # here because start.sh runs every daemon itself.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

for t in "${tools[@]}"; do
  command -v "$t" >/dev/null || { echo "ceph/install: $t not found after installing ${packages[*]}" >&2; exit 1; }
done
