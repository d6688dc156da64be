#!/usr/bin/env bash
# The runtime-only build's qfx (QFX_RUNTIME_ONLY): no libtorch linked; qfx run gives
# libtorch's float outputs and equal int8 outputs on every CPU backend; qfx bench
# times side by side; the full build's commands are refused with the reason.
# Needs no Python: outputs are compared with od and awk.
set -u
source "$(dirname "$0")/check.sh"
pass=0 fail=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
O=$FIXTURES/onnx

# float32 values of a little-endian .npy (version 1 header: its length at bytes 8-9).
npy_floats() {
  local hl
  hl=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' ')
  od -An -tf4 -v -j$((10 + hl)) "$1" | tr -s ' ' '\n' | grep -v '^$'
}
# Largest |a - b| relative to the largest |b|.
max_rel() {
  paste <(npy_floats "$1") <(npy_floats "$2") |
    awk '{d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if (d > md) md = d; if (m > mb) mb = m}
         END {printf "%.3e\n", (mb > 0 ? md / mb : md)}'
}

check "no libtorch is linked" 0 "^0$" -- bash -c "ldd '$QFX' | grep -c -E 'libtorch|libc10' || true"
check "--version says runtime only" 0 "runtime only" -- "$QFX" --version

"$QFX" run "$O/resnet18.onnx" -i "$O/resnet18.in.npy" -o "$T/r18.npy" >/dev/null
rel=$(max_rel "$T/r18.npy" "$O/resnet18.torch.npy")
check "fp32 resnet18 within 1e-4 of libtorch's output (max rel $rel)" 0 "ok" -- \
  awk -v r="$rel" 'BEGIN {if (r + 0 < 1e-4) print "ok"; else exit 1}'

for m in qdq_convnet qdq_s8; do
  "$QFX" run "$O/$m.onnx" -i "$O/$m.in.npy" -o "$T/$m.onednn.npy" --backend onednn >/dev/null
  "$QFX" run "$O/$m.onnx" -i "$O/$m.in.npy" -o "$T/$m.ref.npy" --backend reference >/dev/null
  check "int8 $m: onednn equals reference bit for bit" 0 "" -- cmp "$T/$m.onednn.npy" "$T/$m.ref.npy"
done
check "run --explain names each node's kernel" 0 "# kernels \(backend onednn\)" -- \
  "$QFX" run "$O/qdq_convnet.onnx" -i "$O/qdq_convnet.in.npy" --explain
check "bench: backends side by side" 0 "\| qdq_convnet.onnx \| 1 \| reference \|.*x \|" -- \
  "$QFX" bench "$O/qdq_convnet.onnx" --backends onednn,reference --batch 1 --iters 3
check "bench --peak: the measured peak first" 0 "^peak \(.*int8 [0-9.]+ GOP/s \(" -- \
  "$QFX" bench "$O/qdq_convnet.onnx" --backends onednn --batch 1 --iters 3 --peak
check "bench --peak: each row's GOP/s and fraction of the peak" 0 \
  "^\| qdq_convnet.onnx \| 1 \| onednn \|.*x \| [0-9.]+ \| [0-9]+ % \|$" -- \
  "$QFX" bench "$O/qdq_convnet.onnx" --backends onednn --batch 1 --iters 3 --peak

check "ptq is refused with the reason" 2 "runtime-only build.*ptq needs the full build" -- "$QFX" ptq cfg.yaml
check "a missing model names the file (exit 7)" 7 "nope.onnx" -- "$QFX" run "$T/nope.onnx" -i "$O/qdq_convnet.in.npy"
check "an unknown backend is named (exit 3)" 3 "warp9" -- \
  "$QFX" run "$O/qdq_convnet.onnx" -i "$O/qdq_convnet.in.npy" --backend warp9

echo "runtime-only CLI: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
