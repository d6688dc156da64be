#!/bin/bash
# Where a model's time goes on the GPU: one run of MODEL (a model name inside a bundle
# made by tools/gpu/bundle.sh) at each batch size with QFX_PROFILE=1 and
# CUDA_LAUNCH_BLOCKING=1, after 3 warm-up runs, summed by op and implementation
# (milliseconds per run, largest first).
#   tools/gpu/profile.sh BUNDLE.tar.xz MODEL.onnx BATCH...
set -euo pipefail
bundle=$1 model=$2
shift 2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
tar -C "$root" -xJf "$bundle"
cuda_libs=$(ldconfig -p | awk '/libcublasLt\.so\.13/{print $NF}' | head -1 | xargs -r dirname)
export LD_LIBRARY_PATH="$root/lib:${cuda_libs}:${LD_LIBRARY_PATH:-}"
for batch in "$@"; do
  QFX_PROFILE=1 CUDA_LAUNCH_BLOCKING=1 "$root/bin/qfx_runtime_bench" "$root/models/$model" --backends cuda \
    --batch "$batch" --iters 1 2> "$root/profile.txt" > /dev/null
  lines=$(grep -c '^\[profile\]' "$root/profile.txt")
  echo "## $model, batch $batch: ms per run by op and implementation (the last of 4 runs)"
  grep '^\[profile\]' "$root/profile.txt" | tail -n $((lines / 4)) |
    awk '{k = $2 " " $3; s[k] += $(NF - 1); n[k]++; t += $(NF - 1)}
         END {for (k in s) printf "%9.3f ms %4d nodes  %s\n", s[k], n[k], k; printf "%9.3f ms  total\n", t > "/dev/stderr"}' 2>&1 |
    sort -g -r
done
