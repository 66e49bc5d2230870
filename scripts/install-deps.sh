#!/usr/bin/env bash
# Install cft's build dependencies on Debian 12 (run as root). Idempotent:
# apt is not touched at all when everything is already installed.
set -euo pipefail

PKGS=(
    build-essential
    cmake
    pkg-config
    libopenblas-dev
    liblapacke-dev
    libfftw3-dev
    libgc-dev
    libcjson-dev
    libdnnl-dev
    libxsmm-dev
    libopenmpi-dev
    openmpi-bin
    ca-certificates
)

missing=()
for p in "${PKGS[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    if [ "$status" != "install ok installed" ]; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-deps: all build dependencies already installed"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run this script as root to install them" >&2
    exit 1
fi

echo "install-deps: installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${PKGS[@]}"
