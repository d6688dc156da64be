#!/usr/bin/env bash
# AIMET's encodings: `output.formats: [onnx, aimet]` writes model_aimet.onnx and
# model_aimet.encodings; AIMET's own QuantSim (aimet-onnx) loads them, quantizes
# exactly the encoded tensors and reproduces the int8 QDQ model's outputs as ONNX
# Runtime computes them (tools/aimet/quantsim_check.py), for the onednn target (uint8
# activations, per-channel int8 weights) in format 1.0.0, the tflite_like target
# (asymmetric int8 activations) in 2.0.0, and block-wise int4 weights in both (bit for
# bit). An
# int8 model AIMET's float graph cannot hold (MatMulNBits) is refused naming the node,
# nothing written; an unknown version is a configuration error.
# Needs $QFX, $FIXTURES, $PY with aimet-onnx.
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"
here="$(cd "$(dirname "$0")" && pwd)"
quick=(--set calibration.num_samples=64 --set evaluation.num_samples=128 --set evaluation.sqnr_samples=0
       --set evaluation.reference_check=0)
check_py="$here/../../tools/aimet/quantsim_check.py"
# The default job's model on two targets: AIMET equals ONNX Runtime on the QDQ model to
# the last bit on at least 99 % of the logits, and within one output step on all.
agree='import json,sys; s=json.loads(sys.stdin.read().splitlines()[-1]); ok = s["quantizers_enabled"] > 0 and s["delegated"] <= 1 and s["identical"] >= 0.99 and s["max_abs_diff"] <= s["output_step"] * 1.0001 and s["argmax_agree"] == 1.0; print("ok" if ok else s)'
for target in "onednn 1.0.0" "tflite_like 2.0.0"; do
  set -- $target
  check "qfx ptq --backend $1, aimet $2" 0 "AIMET $2\\): [0-9]+ activation and [0-9]+ weight encodings" -- \
    "$QFX" ptq "${quick[@]}" --set backend=$1 --set "output.formats=[onnx, aimet]" --set output.aimet_encoding_version=$2 \
    --set output.dir="$tmp/$1"
  $PY -c "
import numpy as np, onnxruntime as ort, onnx
m = onnx.load('$tmp/$1/model_fp32.onnx')
np.save('$tmp/x_$1.npy', np.random.RandomState(0).rand(32, *[d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim][1:]).astype(np.float32))"
  check "AIMET QuantSim on model_aimet.* equals ONNX Runtime on model_int8.onnx ($1, $2)" 0 "^ok" -- \
    bash -c "$PY '$check_py' '$tmp/$1' '$tmp/x_$1.npy' | $PY -c '$agree'"
  check "model_aimet.onnx has no Q/DQ left; its weights are the int8 model's ($1)" 0 "^ok" -- $PY -c "
import json, numpy as np, onnx
from onnx import numpy_helper as nh
f = onnx.load('$tmp/$1/model_aimet.onnx'); onnx.checker.check_model(f)
assert not [n for n in f.graph.node if 'Quantize' in n.op_type]
q = onnx.load('$tmp/$1/model_int8.onnx'); qi = {t.name: nh.to_array(t) for t in q.graph.initializer}
fi = {t.name: nh.to_array(t) for t in f.graph.initializer}
e = json.load(open('$tmp/$1/model_aimet.encodings'))
params = e['param_encodings'] if e['version'] == '1.0.0' else [x for x in e['encodings'] if x['name'] in fi]
for n in q.graph.node:
    if n.op_type == 'DequantizeLinear' and n.input[0] in qi and qi[n.input[0]].dtype == np.int8:
        axis = {a.name: a.i for a in n.attribute}.get('axis', 1)
        s = qi[n.input[1]]; shape = [1] * qi[n.input[0]].ndim; shape[axis] = s.size
        want = (qi[n.input[0]].astype(np.float32) - qi[n.input[2]].reshape(shape)) * s.reshape(shape)
        assert np.array_equal(fi[n.output[0]], want), n.output[0]
assert len(params) == sum(1 for n in q.graph.node if n.op_type == 'DequantizeLinear' and n.input[0] in qi and qi[n.input[0]].dtype == np.int8)
print('ok')"
done

# Block-wise int4 weights (MiniLM, W4 block 32, float activations), both formats.
export QFX_FIXTURES=$(cd "$FIXTURES" && pwd)
for v in 1.0.0 2.0.0; do
  check "qfx ptq w4_block_weight_only.yaml, aimet $v" 0 "AIMET $v\\): 0 activation and 24 weight encodings" -- \
    "$QFX" ptq "$here/../../configs/ptq/w4_block_weight_only.yaml" --set calibration.num_samples=8 \
    --set evaluation.num_samples=16 --set evaluation.reference_check=0 --set "output.formats=[onnx, aimet]" \
    --set output.aimet_encoding_version=$v --set output.dir="$tmp/w4_$v"
  $PY -c "import numpy as np; np.save('$tmp/minilm.npy', np.load('$FIXTURES/minilm_eval.npy')[:8])"
  check "AIMET QuantSim with block-wise int4 encodings equals ONNX Runtime ($v)" 0 "^ok" -- \
    bash -c "$PY '$check_py' '$tmp/w4_$v' '$tmp/minilm.npy' | $PY -c 'import json,sys; s=json.loads(sys.stdin.read().splitlines()[-1]); print(\"ok\" if s[\"encodings\"] == s[\"quantizers_enabled\"] == 24 and s[\"identical\"] == 1.0 else s)'"
done

check "MatMulNBits has no place in AIMET's float graph: exit 5 naming the node, nothing written" 5 \
  "node '.*' \\(MatMulNBits\\).*custom-domain" -- \
  "$QFX" ptq "$here/../../configs/ptq/w4_block_weight_only.yaml" --set calibration.num_samples=8 \
  --set evaluation.num_samples=16 --set output.block_weight_format=matmul_nbits --set "output.formats=[onnx, aimet]" \
  --set output.dir="$tmp/nbits"
check "... and the output folder holds nothing" 0 "^ok" -- bash -c "[ ! -e '$tmp/nbits/model_int8.onnx' ] && [ ! -e '$tmp/nbits/model_aimet.onnx' ] && echo ok"
check "an encodings version qfx does not write: exit 3 naming the key" 3 "output.aimet_encoding_version" -- \
  "$QFX" ptq "${quick[@]}" --set "output.formats=[onnx, aimet]" --set output.aimet_encoding_version=3.0.0 --set output.dir="$tmp/bad"

check_encodings "$tmp"
echo "aimet_test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
