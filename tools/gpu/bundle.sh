#!/bin/bash
# Packs what the CUDA checks and the runtime benchmark need on a GPU machine that has the NVIDIA driver and the
# CUDA 13 libraries but not qfx's other dependencies: the CUDA test binary, the
# shared libraries it loads that such a machine may lack, and int8 models to check.
#   tools/gpu/bundle.sh BUILD_DIR OUT.tar.xz [MODEL.onnx | bench:MODEL.onnx ...]
# Every model is checked against the reference backend; those given as bench:PATH are
# also benchmarked (onednn against cuda).
# On the GPU machine: tools/gpu/prove.sh OUT.tar.xz
set -euo pipefail
build=$1 out=$2
shift 2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/models"
cp "$build/tests/qfx_tests_cuda" "$build/tools/qfx_runtime_bench" "$stage/bin/"
# Every library the binary resolves here except the C / C++ runtimes (the GPU machine's
# are newer, and its CUDA libraries need them) and the CUDA driver and toolkit
# libraries (the GPU machine's own match its driver).
ldd "$build/tests/qfx_tests_cuda" "$build/tools/qfx_runtime_bench" | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libgomp.so*|libz.so*) ;;
    libcuda.so*|libcublas*|libcudart*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
i=0
: > "$stage/bench.txt"
for arg in "$@"; do
  m=${arg#bench:}
  i=$((i + 1))
  name=$(basename "$(dirname "$m")")_$(basename "$m")
  cp "$m" "$stage/models/$name"
  [ "$m" != "$arg" ] && echo "$name" >> "$stage/bench.txt"
done
tar -C "$stage" -cJf "$out" .
echo "bundle: $out ($(du -h "$out" | cut -f1)): $(ls "$stage/lib" | tr '\n' ' ') + $i models"
