#!/bin/bash
# qfx ptq with ptq.gptq on all-MiniLM-L6-v2 (trained weights, torch.export program):
# 4-bit block-wise weights (blocks of 32), float activations. GPTQ's int8-model cosine
# against fp32 must be at least round to nearest's, every GPTQ'd layer's proxy error
# below nearest's, and the model written at opset 21. ptq.awq likewise: cosine at least
# nearest's, every group's error at most nearest's; a bad ptq.awq.grid is exit 3.
# Env: QFX (the qfx binary), FIXTURES (the build's fixtures), QFX_PYTHON.
set -u
PY=${QFX_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
W="{granularity: per_block, block_size: 32, bits: 4, qscheme: symmetric}"
run() {  # NAME GPTQ [MORE --set ARGS]
  "$QFX" ptq --set model.path="$FIXTURES/minilm.pt2" --set "model.input_shape=[-1, 11, 384]" \
    --set "calibration.data={format: npy, images: $FIXTURES/minilm_cal.npy}" --set calibration.num_samples=64 \
    --set "evaluation.data={format: npy, images: $FIXTURES/minilm_eval.npy}" --set evaluation.metric=cosine \
    --set evaluation.sqnr_samples=0 --set output.report_html=false --set output.float_model=false \
    --set "qconfig={global: null, module_type: {Linear: {activation: {dtype: float}, weight: $W}, linear: {activation: {dtype: float}, weight: $W}}}" \
    --set "ptq.gptq=$2" "${@:3}" --set output.dir="$tmp/$1" > "$tmp/$1.log" 2>&1 || { echo "FAIL: qfx ptq ($1)"; cat "$tmp/$1.log"; exit 1; }
}
run rtn false
run gptq true
run awq false --set ptq.awq=true
grep "gptq:" "$tmp/gptq.log"
grep "AWQ:" "$tmp/awq.log"
msg=$("$QFX" ptq --set model.path="$FIXTURES/minilm.pt2" --set "ptq.awq={grid: 0}" --set output.dir="$tmp/bad" 2>&1)
rc=$?
if [ "$rc" -ne 3 ] || ! grep -q "grid" <<<"$msg" || [ -e "$tmp/bad" ]; then
  echo "FAIL: ptq.awq.grid 0: exit $rc, expected 3 naming grid, no output folder"; echo "$msg"; exit 1
fi
"$PY" - "$tmp" <<'PYEOF'
import json, sys
import onnx
tmp = sys.argv[1]
rtn, gptq, awq = (json.load(open("%s/%s/report.json" % (tmp, n))) for n in ("rtn", "gptq", "awq"))
c_rtn, c_gptq = rtn["evaluation"]["cosine_int8_vs_fp32"], gptq["evaluation"]["cosine_int8_vs_fp32"]
print("cosine vs fp32: nearest %.5f, GPTQ %.5f" % (c_rtn, c_gptq))
layers = gptq["algorithms"]["gptq"]["layers"]
fail = []
if not c_gptq >= c_rtn:
    fail.append("GPTQ's cosine %.5f is below nearest's %.5f" % (c_gptq, c_rtn))
if len(layers) < 24:
    fail.append("GPTQ ran on %d layers, expected the 24 linears (12 modules, 12 attention projections)" % len(layers))
fail += ["%s: GPTQ's error %g is not below nearest's %g" % (l["layer"], l["error_gptq"], l["error_nearest"])
         for l in layers if not l["error_gptq"] < l["error_nearest"]]
c_awq = awq["evaluation"]["cosine_int8_vs_fp32"]
groups = awq["algorithms"]["awq"]["groups"]
print("cosine vs fp32: AWQ %.5f (%d groups, %d scaled)" % (c_awq, len(groups), sum(g["ratio"] > 0 for g in groups)))
if not c_awq >= c_rtn:
    fail.append("AWQ's cosine %.5f is below nearest's %.5f" % (c_awq, c_rtn))
if len(groups) < 24 or not any(g["ratio"] > 0 for g in groups):
    fail.append("AWQ: %d groups (expected the 24 linears, attention projections included), or none scaled" % len(groups))
fail += ["AWQ group %s: error %g above nearest's %g" % (g["input"], g["error_awq"], g["error_nearest"])
         for g in groups if not g["error_awq"] <= g["error_nearest"]]
m = onnx.load("%s/gptq/model_int8.onnx" % tmp)
if max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")) < 21:
    fail.append("the model is not written at opset 21")
for f in fail:
    print("FAIL:", f)
print("ok" if not fail else "%d failures" % len(fail))
sys.exit(1 if fail else 0)
PYEOF
