#!/usr/bin/env bash
# Installs every Debian package qfx needs to build, test and export its fixtures.
# Idempotent: packages already present are not reinstalled; a second run is quick.
# Usage: sudo tools/install_deps.sh   (or as root)
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev            # libtorch 1.13.1 (CPU) with its CMake config
  libdnnl-dev             # oneDNN 2.6.x
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libpng-dev libjpeg-dev zlib1g-dev
  dataset-fashion-mnist   # real images + labels (IDX)
  python3-torch python3-torchvision python3-numpy python3-onnx  # fixture export only
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PKGS[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
