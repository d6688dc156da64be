#!/usr/bin/env bash
# qfx run against ONNX Runtime (npm onnxruntime-node, CPU) on the exported models:
# float models within 1e-4 relative; QDQ models within 1 output unit of ONNX
# Runtime's QDQ semantics (graph optimizations off), and reported against its
# fused int8 kernels. Needs $QFX, $FIXTURES; $1 = tools/ort_check.
set -u
ort=$1
if [ ! -d "$ort/node_modules/onnxruntime-node" ]; then
  echo "SKIP: onnxruntime-node not installed in $ort (tools/install_deps.sh installs it)"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
compare() {  # name qfx.npy ort.npy mode(rel|units:SCALE) limit
  /usr/bin/python3 - "$@" <<'PY'
import sys, numpy as np
name, a, b, mode, limit = sys.argv[1:6]
a, b = np.load(a), np.load(b)
if a.shape != b.shape:
    print(f"FAIL {name}: shape {a.shape} vs ONNX Runtime {b.shape}"); sys.exit(1)
if mode == "rel":
    err = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12)); unit = "relative"
else:
    err = float(np.abs(a - b).max() / float(mode.split(":")[1])); unit = "output units"
ok = err <= float(limit)
print(f"{'ok  ' if ok else 'FAIL'} {name}: max difference {err:.3g} {unit} (limit {limit}); argmax agree "
      f"{float((a.reshape(a.shape[0], -1).argmax(1) == b.reshape(b.shape[0], -1).argmax(1)).mean()):.3f}")
sys.exit(0 if ok else 1)
PY
}
for m in resnet18 mobilenet_v2 zoo; do
  for backend in onednn reference; do
    "$QFX" run "$FIXTURES/onnx/$m.onnx" -i "$FIXTURES/onnx/$m.in.npy" -o "$tmp/$m.$backend.npy" --backend $backend >/dev/null || fail=1
  done
  node "$ort/run.js" "$FIXTURES/onnx/$m.onnx" "$tmp/$m.ort.npy" "$FIXTURES/onnx/$m.in.npy" || fail=1
  for backend in onednn reference; do compare "$m ($backend)" "$tmp/$m.$backend.npy" "$tmp/$m.ort.npy" rel 1e-4 || fail=1; done
done
for m in qdq_convnet qdq_s8; do
  "$QFX" run "$FIXTURES/onnx/$m.onnx" -i "$FIXTURES/onnx/$m.in.npy" -o "$tmp/$m.qfx.npy" --backend reference >/dev/null || fail=1
  ORT_OPT=disabled node "$ort/run.js" "$FIXTURES/onnx/$m.onnx" "$tmp/$m.ort.npy" "$FIXTURES/onnx/$m.in.npy" || fail=1
  node "$ort/run.js" "$FIXTURES/onnx/$m.onnx" "$tmp/$m.ortopt.npy" "$FIXTURES/onnx/$m.in.npy" || fail=1
  compare "$m int8 vs ORT QDQ semantics" "$tmp/$m.qfx.npy" "$tmp/$m.ort.npy" units:0.02 1 || fail=1
  compare "$m int8 vs ORT fused int8 kernels (informational)" "$tmp/$m.qfx.npy" "$tmp/$m.ortopt.npy" units:0.02 1000 || fail=1
done
exit $fail
