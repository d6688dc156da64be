#!/bin/bash
# qfx ptq with ptq.mixed_precision on all-MiniLM-L6-v2 (trained weights), the shipped
# config configs/ptq/mixed_precision_minilm.yaml: within 4.85 bits per weight (all-W8's
# size minus 40 %) the choice must measure a better output SQNR than every layer in
# 4-bit blocks of 128; the int8 model's weights must be exactly the chosen widths (INT4
# elements = the w4 layers' weights, INT8 = the w8 layers'); config_final.yaml must
# reproduce the model byte for byte; bad settings are exit 3 with nothing written.
# Env: QFX (the qfx binary), FIXTURES (the build's fixtures), SRC (the source tree), QFX_PYTHON.
set -u
PY=${QFX_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export QFX_FIXTURES="$FIXTURES"
common=(--set output.report_html=false --set output.float_model=false)
QFX_ARGS=("$SRC/configs/ptq/mixed_precision_minilm.yaml" "${common[@]}")
"$QFX" ptq "${QFX_ARGS[@]}" --set output.dir="$tmp/mixed" > "$tmp/mixed.log" 2>&1 || { echo "FAIL: qfx ptq"; cat "$tmp/mixed.log"; exit 1; }
grep "^mixed_precision:" "$tmp/mixed.log"
"$QFX" ptq "$tmp/mixed/config_final.yaml" "${common[@]}" --set output.dir="$tmp/again" > "$tmp/again.log" 2>&1 ||
  { echo "FAIL: qfx ptq config_final.yaml"; cat "$tmp/again.log"; exit 1; }
for f in model_int8.onnx encodings.json; do
  cmp -s "$tmp/mixed/$f" "$tmp/again/$f" || { echo "FAIL: config_final.yaml does not reproduce $f"; exit 1; }
done
if grep -q "mixed_precision" "$tmp/again.log"; then echo "FAIL: config_final.yaml searched again"; exit 1; fi

bad() {  # NAME EXPECTED-TEXT --set ARGS...
  local name=$1 text=$2
  shift 2
  msg=$("$QFX" ptq "${QFX_ARGS[@]}" "$@" --set output.dir="$tmp/$name" 2>&1)
  rc=$?
  if [ "$rc" -ne 3 ] || ! grep -q -- "$text" <<<"$msg" || [ -e "$tmp/$name" ]; then
    echo "FAIL: $name: exit $rc, expected 3 naming '$text', no output folder"; echo "$msg"; exit 1
  fi
}
bad no_budget "needs its budget" --set ptq.mixed_precision=true
bad bad_candidate "'w9' is not a precision" --set "ptq.mixed_precision.candidates=[w4, w9]"
bad twice "listed twice" --set "ptq.mixed_precision.candidates=[w4, w4]"
bad with_fallback "turn one of them off" --set "ptq.auto_fallback={metric: sqnr}"
bad empty_budget "needs weight_bytes, effective_bits or latency" --set "ptq.mixed_precision.budget={}"

"$PY" - "$tmp" <<'PYEOF'
import json, sys
import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
tmp = sys.argv[1]
r = json.load(open("%s/mixed/report.json" % tmp))["mixed_precision"]
fail = []
w4 = r["uniform"]["w4"]["sqnr_db"]
print("measured %.2f dB at %.2f bits per weight; every layer w4 (blocks of 128): %.2f dB" %
      (r["measured_sqnr_db"], r["effective_bits"], w4))
if not r["reached"] or r["effective_bits"] > 4.85 or r["weight_bytes"] > r["weight_bytes_budget"]:
    fail.append("the choice is not within 4.85 bits per weight: %s" % {k: r[k] for k in ("reached", "effective_bits", "weight_bytes")})
if not r["measured_sqnr_db"] > w4:
    fail.append("the choice (%.2f dB) is not better than every layer w4 (%.2f dB)" % (r["measured_sqnr_db"], w4))
if len(r["layers"]) != 18:
    fail.append("%d layers searched, expected 18 (12 Linear modules, 6 attention modules' projections)" % len(r["layers"]))
want = {c: sum(l["weights"] for l in r["layers"] if l["chosen"] == c) for c in ("w4", "w8")}
# The deployed weights: DequantizeLinear inputs that are initializers, by element type.
m = onnx.load("%s/mixed/model_int8.onnx" % tmp)
inits = {i.name: i for i in m.graph.initializer}
got = {"w4": 0, "w8": 0}
for n in m.graph.node:
    if n.op_type == "DequantizeLinear" and n.input[0] in inits:
        t = inits[n.input[0]]
        if t.data_type in (TensorProto.INT4, TensorProto.UINT4):
            got["w4"] += int(np.prod(t.dims))
        elif t.data_type in (TensorProto.INT8, TensorProto.UINT8) and len(t.dims) == 2:
            got["w8"] += int(np.prod(t.dims))
print("weights chosen / in the model: %s / %s" % (want, got))
if got != want:
    fail.append("the model's INT4 / INT8 weights %s are not the chosen %s" % (got, want))
for f in fail:
    print("FAIL:", f)
print("ok" if not fail else "%d failures" % len(fail))
sys.exit(1 if fail else 0)
PYEOF
