#!/usr/bin/env bash
# Installs every Debian package qfx needs to build, test and export its fixtures.
# Idempotent: packages already present are not reinstalled; a second run is quick.
# Usage: sudo tools/install_deps.sh   (or as root)
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev            # libtorch 1.13.1 (CPU) with its CMake config
  libgloo-dev             # Gloo headers and library, for c10d ProcessGroupGloo (distributed calibration, QAT)
  libdnnl-dev             # oneDNN 2.6.x
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libpng-dev libjpeg-dev zlib1g-dev
  dataset-fashion-mnist   # real images + labels (IDX)
  python3-torch python3-torchvision python3-numpy python3-onnx python3-pil  # fixture export only
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

# ONNX Runtime from npm (onnxruntime-node, CPU): the independent check of qfx's
# runtime (tools/ort_check). Its install script only fetches GPU extras: skip it.
ort_dir="$(cd "$(dirname "$0")" && pwd)/ort_check"
if ! command -v npm >/dev/null 2>&1; then
  SUDO=""; if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install_deps: installing nodejs npm (for tools/ort_check)"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
if [ ! -d "$ort_dir/node_modules/onnxruntime-node" ]; then
  echo "install_deps: npm ci --ignore-scripts in tools/ort_check (onnxruntime-node)"
  if ! (cd "$ort_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "install_deps: ERROR: onnxruntime-node could not be installed from npm into $ort_dir;" >&2
    echo "install_deps: the ort_check test needs it (the independent check of qfx's runtime). Fix npm access and rerun." >&2
    exit 1
  fi
  if ! node -e "require('$ort_dir/node_modules/onnxruntime-node')" 2>/dev/null; then
    echo "install_deps: ERROR: onnxruntime-node installed but does not load (node $(node --version 2>&1))" >&2
    exit 1
  fi
else
  echo "install_deps: onnxruntime-node present"
fi
