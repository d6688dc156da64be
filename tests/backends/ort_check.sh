#!/usr/bin/env bash
# qfx run against ONNX Runtime (Python onnxruntime, CPU) on the exported models:
# float models within 1e-4 relative; QDQ models equal to ONNX Runtime's QDQ
# semantics (graph optimizations off) and within 2 output units of its fused int8
# kernels; the PTQ job's int8 model predicts as ONNX Runtime does. Needs $QFX, $FIXTURES; $1 = tools/ort_check.
set -u
ort=$1
PY=${QFX_PYTHON:-python3}
if ! "$PY" -c "import onnxruntime" 2>/dev/null; then  # never a silent skip: install_deps.sh guarantees it
  echo "FAIL: $PY cannot import onnxruntime (run tools/install_deps.sh)"; exit 1
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
compare() {  # name qfx.npy ort.npy mode(rel|units:SCALE) limit
  $PY - "$@" <<'PY'
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
  "$PY" "$ort/run.py" "$FIXTURES/onnx/$m.onnx" "$tmp/$m.ort.npy" "$FIXTURES/onnx/$m.in.npy" || fail=1
  for backend in onednn reference; do compare "$m ($backend)" "$tmp/$m.$backend.npy" "$tmp/$m.ort.npy" rel 1e-4 || fail=1; done
done
# Recurrent layers as other exporters write them: ONNX LSTM and GRU with biases and
# initial states, reverse and bidirectional, GRU with linear_before_reset 0 and 1
# (random weights, made here with onnx.helper); float within 1e-4 relative.
$PY - "$tmp" <<'PY' || fail=1
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
out, rng = sys.argv[1], np.random.default_rng(7)
S, N, I, H = 6, 3, 5, 4
def model(name, op, direction, G, extra):
    D = 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, a).astype(np.float32), n) for n, a in
             (("W", (D, G * H, I)), ("R", (D, G * H, H)), ("B", (D, 2 * G * H)), ("h0", (D, N, H)), ("c0", (D, N, H)))]
    ins = ["x", "W", "R", "B", "", "h0"] + (["c0"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, ["y", "y_h"], hidden_size=H, direction=direction, **extra)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, N, I])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits if op == "LSTM" else inits[:4])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), "%s/%s.onnx" % (out, name))
model("lstm_reverse", "LSTM", "reverse", 4, {})
model("lstm_bidirectional", "LSTM", "bidirectional", 4, {})
model("gru_forward", "GRU", "forward", 3, {"linear_before_reset": 0})
model("gru_bidirectional", "GRU", "bidirectional", 3, {"linear_before_reset": 1})
np.save("%s/seq.npy" % out, rng.normal(0, 1, (S, N, I)).astype(np.float32))
PY
for m in lstm_reverse lstm_bidirectional gru_forward gru_bidirectional; do
  "$QFX" run "$tmp/$m.onnx" -i "$tmp/seq.npy" -o "$tmp/$m.qfx.npy" >/dev/null || fail=1
  "$PY" "$ort/run.py" "$tmp/$m.onnx" "$tmp/$m.ort.npy" "$tmp/seq.npy" || fail=1
  compare "$m (float)" "$tmp/$m.qfx.npy" "$tmp/$m.ort.npy" rel 1e-4 || fail=1
done
# The runtime's integer, index, reduction and value-shaped ops, one op per model
# (tests/backends/ort_ops_cases.py): both backends against ONNX Runtime, integers equal.
cases=$(dirname "$0")/ort_ops_cases.py
"$PY" "$cases" "$tmp/ops" || fail=1
while read -r name inputs; do
  for backend in reference onednn; do
    "$QFX" run "$tmp/ops/$name.onnx" -i $inputs -o "$tmp/ops/$name.$backend.npy" --backend $backend >"$tmp/ops/$name.log" 2>&1 ||
      { echo "FAIL $name: qfx run ($backend): $(tail -1 "$tmp/ops/$name.log")"; fail=1; }
  done
  "$PY" "$ort/run.py" "$tmp/ops/$name.onnx" "$tmp/ops/$name.ort.npy" $inputs || fail=1
done <"$tmp/ops/cases.txt"
"$PY" "$cases" --compare "$tmp/ops" || fail=1
for m in qdq_convnet qdq_s8; do
  ORT_OPT=disabled "$PY" "$ort/run.py" "$FIXTURES/onnx/$m.onnx" "$tmp/$m.ort.npy" "$FIXTURES/onnx/$m.in.npy" || fail=1
  "$PY" "$ort/run.py" "$FIXTURES/onnx/$m.onnx" "$tmp/$m.ortopt.npy" "$FIXTURES/onnx/$m.in.npy" || fail=1
  for backend in reference onednn; do
    "$QFX" run "$FIXTURES/onnx/$m.onnx" -i "$FIXTURES/onnx/$m.in.npy" -o "$tmp/$m.$backend.npy" --backend $backend >/dev/null || fail=1
    # The README's claims: equal to ONNX Runtime's QDQ semantics exactly (0 units);
    # within 2 units of its fused int8 kernels (their own fixed-point requantization).
    compare "$m int8 ($backend) vs ORT QDQ semantics" "$tmp/$m.$backend.npy" "$tmp/$m.ort.npy" units:0.02 0 || fail=1
    compare "$m int8 ($backend) vs ORT fused int8 kernels" "$tmp/$m.$backend.npy" "$tmp/$m.ortopt.npy" units:0.02 2 || fail=1
  done
done
# The PTQ job's int8 model: qfx's runtime and ONNX Runtime (QDQ semantics) must
# predict the same class for at least 99.8% of 1,000 Fashion-MNIST test images
# (measured: all of them; two near-tied logits may flip).
"$QFX" ptq --set calibration.num_samples=256 --set 'evaluation=null' --set output.dir="$tmp/ptq" >"$tmp/ptq.log" 2>&1 ||
  { echo "FAIL qfx ptq"; tail -3 "$tmp/ptq.log"; fail=1; }
$PY - "$tmp/test.npy" <<'PY'
import gzip, sys, numpy as np
with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[:1000]
np.save(sys.argv[1], ((x.astype(np.float32) / 255 - 0.2860) / 0.3530).astype(np.float32))
PY
"$QFX" run "$tmp/ptq/model_int8.onnx" -i "$tmp/test.npy" -o "$tmp/ptq.qfx.npy" >/dev/null || fail=1
ORT_OPT=disabled "$PY" "$ort/run.py" "$tmp/ptq/model_int8.onnx" "$tmp/ptq.ort.npy" "$tmp/test.npy" || fail=1
$PY - "$tmp/ptq.qfx.npy" "$tmp/ptq.ort.npy" <<'PY' || fail=1
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
agree = float((a.argmax(1) == b.argmax(1)).mean())
ok = agree >= 0.998
print(f"{'ok  ' if ok else 'FAIL'} qfx ptq int8 model: qfx runtime and ONNX Runtime agree on {agree:.4f} of {len(a)} predictions (limit 0.998)")
sys.exit(0 if ok else 1)
PY
exit $fail
