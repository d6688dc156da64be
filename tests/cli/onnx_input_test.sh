#!/usr/bin/env bash
# Float ONNX models (model.path: x.onnx) through the command line: the same accuracy
# as the TorchScript frontend on the trained Fashion-MNIST ResNet, QAT on an ONNX
# model, models from both of torch's ONNX exporters (1-D, transformer, segmentation)
# with ONNX Runtime running qfx's int8 model to the same outputs, model.input_shape
# read from the model, and bad files as clear errors with their exit codes.
# Needs $QFX, $FIXTURES (export_float_onnx.py, train_fashion_mnist.py); $1 = tools/ort_check.
set -u
pass=0; fail=0
ort=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"

quick=(--set calibration.num_samples=128 --set evaluation.num_samples=500 --set evaluation.reference_check=100
       --set evaluation.sqnr_samples=16)
for ext in pt onnx; do
  check "qfx ptq fashion_resnet.$ext" 0 "reference backend: 100 of 100 int8 outputs identical" -- \
    "$QFX" ptq --set model.path="$FIXTURES/fashion_resnet.$ext" "${quick[@]}" --set output.dir="$tmp/ptq_$ext"
done
check "PTQ: the ONNX model's int8 top-1 within 0.4 points of the TorchScript model's" 0 "^ok" -- $PY -c "
import json
a, b = (json.load(open('$tmp/ptq_%s/report.json' % e))['evaluation'] for e in ('pt', 'onnx'))
ok = abs(a['top1_int8'] - b['top1_int8']) <= 0.004 and abs(a['top1_fp32'] - b['top1_fp32']) < 1e-9
print('ok' if ok else 'differ', a['top1_int8'], b['top1_int8'])"
check "qfx qat fashion_mobilenet.onnx (20 steps)" 0 "reference backend: 100 of 100 int8 outputs identical" -- \
  "$QFX" qat --set model.path="$FIXTURES/fashion_mobilenet.onnx" --set training.num_samples=1280 --set training.max_steps=20 \
  --set calibration.num_samples=128 --set evaluation.num_samples=500 --set evaluation.reference_check=100 --set output.dir="$tmp/qat"

npy() {  # NAME SEED SHAPE
  $PY -c "import numpy; numpy.save('$tmp/$1.npy', numpy.random.default_rng($2).normal(0, 1, $3).astype(numpy.float32))"
}
# qfx ptq on FIXTURE.onnx from a config without model.input_shape (the model's own),
# then ONNX Runtime runs the int8 model: every output within 5% of the largest.
onnx_ptq() {  # FIXTURE DATA PATTERN [ARGS...]
  local fixture=$1 data=$2 pattern=$3; shift 3
  cat > "$tmp/$fixture.yaml" <<YAML
model: {path: $FIXTURES/$fixture.onnx}
calibration: {data: {format: npy, images: $tmp/$data.npy}, num_samples: 32}
evaluation: {data: {format: npy, images: $tmp/$data.npy}, metric: cosine, reference_check: -1}
output: {dir: $tmp/$fixture}
YAML
  check "qfx ptq $fixture.onnx" 0 "$pattern" -- "$QFX" ptq "$tmp/$fixture.yaml" "$@"
  check "$fixture: ONNX Runtime runs the int8 model and agrees" 0 "^ok" -- bash -c \
    "'$QFX' run '$tmp/$fixture/model_int8.onnx' -i '$tmp/$data.npy' -o '$tmp/$fixture.qfx.npy' >/dev/null &&
     ORT_OPT=disabled $PY '$ort/run.py' '$tmp/$fixture/model_int8.onnx' '$tmp/$fixture.ort.npy' '$tmp/$data.npy' 2>/dev/null &&
     $PY -c \"
import numpy as np; a, b = np.load('$tmp/$fixture.qfx.npy'), np.load('$tmp/$fixture.ort.npy')
d = float(np.abs(a - b).max() / np.abs(b).max())
print('ok' if a.shape == b.shape and d < 0.05 else 'differ', d)\""
}
npy audio 4 "(32, 40, 100)"
onnx_ptq kws_1d audio "output: cosine int8 vs fp32 0\\.99"
npy x32 3 "(32, 3, 32, 32)"
onnx_ptq vit_tiny x32 "output: cosine int8 vs fp32 0\\.99"
onnx_ptq vit_tiny_legacy x32 "output: cosine int8 vs fp32 0\\.99"
onnx_ptq vit_tiny_opset14 x32 "output: cosine int8 vs fp32 0\\.99"
# A target whose GELU, softmax and layer normalisation are integer-only (transformer_npu,
# docs/targets.md), and the ViT under another target arithmetic (tflite_like).
"$QFX" ptq "$tmp/vit_tiny.yaml" --set backend=transformer_npu --set output.dir="$tmp/vit_npu" >"$tmp/vit_npu.log" 2>&1
check "vit_tiny on transformer_npu: integer-only kernels, reference == onednn" 0 "^ok" -- bash -c \
  "grep -q 'reference backend: 32 of 32 int8 outputs identical' '$tmp/vit_npu.log' &&
   grep -q '2 QIntGelu on reference, 5 QIntLayerNorm on reference, 2 QIntSoftmax on reference' '$tmp/vit_npu.log' &&
   grep -qE 'output: cosine int8 vs fp32 0\.99' '$tmp/vit_npu.log' &&
   grep -q 'integer_only' '$tmp/vit_npu/model_int8.onnx' && $PY -c \"
import json; ops = json.load(open('$tmp/vit_npu/encodings.json'))['integer_ops'].values()
kinds = sorted(o['op'] for o in ops if o['op'].startswith('QInt'))
print('ok' if kinds == ['QIntGelu'] * 2 + ['QIntLayerNorm'] * 5 + ['QIntSoftmax'] * 2 else kinds)\""
# ONNX Runtime computes ONNX's arithmetic (float GELU, softmax, layer norm) on the same
# file: it agrees with qfx run --onnx-arithmetic, and the target's arithmetic moves the
# outputs a little.
check "vit_tiny on transformer_npu: ONNX Runtime agrees with qfx's ONNX arithmetic; the target's is close" 0 "^ok" -- bash -c \
  "'$QFX' run '$tmp/vit_npu/model_int8.onnx' -i '$tmp/x32.npy' -o '$tmp/vit_npu.qfx.npy' >/dev/null &&
   '$QFX' run '$tmp/vit_npu/model_int8.onnx' -i '$tmp/x32.npy' -o '$tmp/vit_npu.onnx_ar.npy' --onnx-arithmetic >/dev/null &&
   ORT_OPT=disabled $PY '$ort/run.py' '$tmp/vit_npu/model_int8.onnx' '$tmp/vit_npu.ort.npy' '$tmp/x32.npy' 2>/dev/null &&
   $PY -c \"
import numpy as np; t, o, r = (np.load('$tmp/vit_npu.%s.npy' % k) for k in ('qfx', 'onnx_ar', 'ort'))
d = float(np.abs(o - r).max() / np.abs(r).max()); cos = float((t * o).sum() / np.sqrt((t * t).sum() * (o * o).sum()))
print('ok' if d < 0.05 and 0.995 < cos < 1 else 'differ', d, cos)\""
check "vit_tiny on tflite_like (oneDNN declines the empty batch a plan probes)" 0 "reference backend: 32 of 32 int8 outputs identical" -- \
  "$QFX" ptq "$tmp/vit_tiny.yaml" --set backend=tflite_like --set output.dir="$tmp/vit_tfl"
npy x16e 7 "(32, 3, 16, 16)"
onnx_ptq elementwise_net x16e "output: cosine int8 vs fp32 0\\.9[89]"
npy x64 5 "(16, 3, 64, 64)"
onnx_ptq mobilenet_v2_legacy x64 "output: cosine int8 vs fp32 0\\.99"
onnx_ptq lraspp_mobilenet_v3_large x64 "segmentation: mean IoU" --set evaluation.metric=miou --set evaluation.sqnr_samples=0

# A transformer with real trained weights (all-MiniLM-L6-v2, tools/fixtures/minilm.py):
# sentence embeddings, int8 against fp32, from the ONNX model and the torch.export program.
for ext in onnx pt2; do
  check "qfx ptq minilm.$ext (real weights)" 0 "output: cosine int8 vs fp32 0\\.8[7-9]|output: cosine int8 vs fp32 0\\.9" -- \
    "$QFX" ptq --set model.path="$FIXTURES/minilm.$ext" --set "model.input_shape=[-1, 11, 384]" \
    --set "calibration.data={format: npy, images: $FIXTURES/minilm_cal.npy}" --set calibration.num_samples=256 \
    --set "evaluation.data={format: npy, images: $FIXTURES/minilm_eval.npy}" --set evaluation.metric=cosine \
    --set evaluation.reference_check=64 --set evaluation.sqnr_samples=0 --set output.dir="$tmp/minilm_$ext"
done
check "minilm: both frontends within 0.005 cosine" 0 "^ok" -- $PY -c "
import json
a, b = (json.load(open('$tmp/minilm_%s/report.json' % e))['evaluation']['cosine_int8_vs_fp32'] for e in ('onnx', 'pt2'))
print('ok' if abs(a - b) < 0.005 else 'differ', a, b)"

# The same encoder from its token ids: two int64 inputs (input_ids, attention_mask) with
# one data source each, padded sentences (the mask in attention and pooling), from the
# ONNX model, torch.jit.trace's TorchScript and torch.export's program; ONNX Runtime runs
# qfx's int8 model.
ids_data() {  # SPLIT
  echo "{input_ids: {format: npy, images: $FIXTURES/minilm_ids_$1_ids.npy}, attention_mask: {format: npy, images: $FIXTURES/minilm_ids_$1_mask.npy}}"
}
for ext in onnx pt pt2; do
  cat > "$tmp/minilm_ids_$ext.yaml" <<YAML
model:
  path: $FIXTURES/minilm_ids.$ext
  inputs: {input_ids: {shape: [-1, 16], dtype: int64}, attention_mask: {shape: [-1, 16], dtype: int64}}
calibration: {data: $(ids_data cal), num_samples: 256}
evaluation: {data: $(ids_data eval), metric: cosine, reference_check: 64, sqnr_samples: 8}
output: {dir: $tmp/minilm_ids_$ext, report_html: false}
YAML
  check "qfx ptq minilm_ids.$ext (int64 token ids and mask)" 0 "output: cosine int8 vs fp32 0\\.8[6-9]|output: cosine int8 vs fp32 0\\.9" -- \
    "$QFX" ptq "$tmp/minilm_ids_$ext.yaml"
done
check "minilm_ids: the three frontends within 0.005 cosine, the int8 model's inputs int64" 0 "^ok" -- $PY -c "
import json, onnx
c = [json.load(open('$tmp/minilm_ids_%s/report.json' % e))['evaluation']['cosine_int8_vs_fp32'] for e in ('onnx', 'pt', 'pt2')]
m = onnx.load('$tmp/minilm_ids_pt/model_int8.onnx', load_external_data=False)
types = [(i.name, i.type.tensor_type.elem_type) for i in m.graph.input]
ok = max(c) - min(c) < 0.005 and types == [('input_ids', 7), ('attention_mask', 7)]
print('ok' if ok else 'differ', c, types)"
# Each backend's own rounding of the float groups (LayerNorm, softmax, GELU) is amplified
# by 6 layers: ONNX Runtime must agree with qfx on average and be as accurate against fp32.
check "ONNX Runtime runs qfx's int8 minilm_ids: mean cosine to qfx >= 0.98, as accurate vs fp32 (0.005)" 0 "^ok" -- bash -c "
  ORT_OPT=disabled $PY '$ort/run.py' '$tmp/minilm_ids_onnx/model_int8.onnx' '$tmp/ids_ort.npy' \
    '$FIXTURES/minilm_ids_eval_ids.npy' '$FIXTURES/minilm_ids_eval_mask.npy' 2>/dev/null &&
  '$QFX' run '$tmp/minilm_ids_onnx/model_int8.onnx' --input '$FIXTURES/minilm_ids_eval_ids.npy' \
    --input '$FIXTURES/minilm_ids_eval_mask.npy' --output '$tmp/ids_qfx.npy' > /dev/null && $PY -c \"
import numpy as np
a, b, f = np.load('$tmp/ids_ort.npy'), np.load('$tmp/ids_qfx.npy'), np.load('$FIXTURES/minilm_ids_eval.fp32.npy')
cos = lambda x, y: ((x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)).mean()
ok = cos(a, b) >= 0.98 and abs(cos(a, f) - cos(b, f)) <= 0.005
print('ok' if ok else 'differ', cos(a, b), cos(a, f), cos(b, f))\""
check "data with one source for a two-input model: exit 3 naming both inputs" 3 "give one source per input" -- \
  "$QFX" ptq "$tmp/minilm_ids_onnx.yaml" --set "calibration.data={format: npy, images: $FIXTURES/minilm_ids_cal_ids.npy}"
check "a source naming no input: exit 3" 3 "the model has no input 'token_ids'" -- \
  "$QFX" ptq "$tmp/minilm_ids_onnx.yaml" --set "calibration.data.token_ids={format: npy, images: $FIXTURES/minilm_ids_cal_ids.npy}"
check "model.inputs and model.input_shape together: exit 3" 3 "give model.input_shape .a model with one float input. or model.inputs, not both" -- \
  "$QFX" ptq "$tmp/minilm_ids_onnx.yaml" --set "model.input_shape=[-1, 16]"
check "model.inputs with a dtype the ONNX model does not declare: exit 3 naming both" 3 "model.inputs.input_ids.dtype is float32; .* declares int64" -- \
  "$QFX" ptq "$tmp/minilm_ids_onnx.yaml" --set "model.inputs.input_ids={shape: [-1, 16], dtype: float32}"
check "per-input held-out data without labels for metric top1: exit 3 naming its key" 3 "ptq.auto_fallback.metric top1 needs ptq.auto_fallback.data.labels" -- \
  "$QFX" ptq "$tmp/minilm_ids_onnx.yaml" --set "ptq.auto_fallback={metric: top1, data: $(ids_data eval)}"
npy f16 3 "(256, 16)"
check "float data for an int64 input: exit 6 naming the file" 6 "f16.npy: samples are float32; model input 'input_ids' takes int64" -- \
  "$QFX" ptq "$tmp/minilm_ids_onnx.yaml" --set "calibration.data.input_ids={format: npy, images: $tmp/f16.npy}"

# PaddleOCR's trained models from the rapidocr-onnxruntime wheel, upgraded to opset 17
# (tools/fixtures/ocr_models.py), on text rendered here: the direction classifier
# against its labels, the recogniser's CTC strings against the rendered text.
cat > "$tmp/ppocr_cls.yaml" <<YAML
model: {path: $FIXTURES/ppocr_cls.onnx, input_shape: [-1, 3, 48, 192]}
calibration: {data: {format: npy, images: $FIXTURES/ppocr_cls_cal.npy}, num_samples: 128}
evaluation: {data: {format: npy, images: $FIXTURES/ppocr_cls_eval.npy, labels: $FIXTURES/ppocr_cls_labels.npy},
             metric: top1, reference_check: 64, sqnr_samples: 0}
output: {dir: $tmp/ppocr_cls, report_html: false}
YAML
check "ppocr_cls (trained, opset 11 upgraded): fp32 top-1 >= 95% on rendered lines, int8 within 2 points, reference == onednn" 0 "^ok" -- \
  bash -c "'$QFX' ptq '$tmp/ppocr_cls.yaml' >'$tmp/ppocr_cls.log' 2>&1 &&
   grep -q 'reference backend: 64 of 64 int8 outputs identical' '$tmp/ppocr_cls.log' && $PY -c \"
import json; e = json.load(open('$tmp/ppocr_cls/report.json'))['evaluation']
f, q = e['top1_fp32'], e['top1_int8']
print('ok' if f >= 0.95 and q >= f - 0.02 else 'bad', f, q)\""
$PY -c "import numpy; numpy.save('$tmp/rec64.npy', numpy.load('$FIXTURES/ppocr_rec_eval.npy')[:64])"
cat > "$tmp/ppocr_rec.yaml" <<YAML
model: {path: $FIXTURES/ppocr_rec.onnx, input_shape: [-1, 3, 48, 320]}
calibration: {data: {format: npy, images: $FIXTURES/ppocr_rec_cal.npy}, num_samples: 64}
evaluation: {data: {format: npy, images: $tmp/rec64.npy}, metric: cosine, reference_check: 8, sqnr_samples: 0}
output: {dir: $tmp/ppocr_rec, report_html: false}
YAML
check "ppocr_rec (trained SVTR, opset 12 upgraded): qfx ptq, reference == onednn" 0 "reference backend: 8 of 8 int8 outputs identical" -- \
  "$QFX" ptq "$tmp/ppocr_rec.yaml"
check "ppocr_rec: qfx's fp32 reads >= 90% of the rendered lines exactly; ONNX Runtime's int8 argmax equals qfx's on >= 90% of time steps" 0 "^ok" -- \
  bash -c "'$QFX' run '$tmp/ppocr_rec/model_fp32.onnx' -i '$tmp/rec64.npy' -o '$tmp/rec_f.npy' >/dev/null &&
   '$QFX' run '$tmp/ppocr_rec/model_int8.onnx' -i '$tmp/rec64.npy' -o '$tmp/rec_q.npy' >/dev/null &&
   ORT_OPT=disabled $PY '$ort/run.py' '$tmp/ppocr_rec/model_int8.onnx' '$tmp/rec_r.npy' '$tmp/rec64.npy' 2>/dev/null && $PY -c \"
import numpy as np
keys = open('$FIXTURES/ppocr_rec_keys.txt', encoding='utf-8').read().split(chr(10))[:-1]
texts = open('$FIXTURES/ppocr_rec_eval.txt', encoding='utf-8').read().split(chr(10))[:64]
def decode(p):
    out, prev = [], -1
    for k in p.argmax(-1):
        if k != prev and k != 0: out.append(keys[k])
        prev = k
    return ''.join(out)
f, q = ([decode(y) for y in np.load('$tmp/rec_%s.npy' % k)] for k in 'fq')
fp32 = np.mean([a == t for a, t in zip(f, texts)])
steps = float((np.load('$tmp/rec_q.npy').argmax(-1) == np.load('$tmp/rec_r.npy').argmax(-1)).mean())
print('ok' if fp32 >= 0.9 and steps >= 0.9 else 'bad', fp32, steps, np.mean([a == t for a, t in zip(q, texts)]))\""

check "qfx inspect reads an ONNX model" 0 "features.2.conv.0.0: conv2d\\+relu6 -> ConvReLU6_2d" -- \
  "$QFX" inspect "$FIXTURES/mobilenet_v2_legacy.onnx" --backend onednn

npy x16 6 "(8, 3, 16, 16)"
bad() {  # FILE RC PATTERN [ARGS...]: data that fits the small CNN the bad files are made from
  local file=$1 rc=$2 pattern=$3; shift 3
  check "qfx ptq on $file" "$rc" "$pattern" -- "$QFX" ptq --set model.path="$FIXTURES/$file" --set "model.input_shape=[-1, 3, 16, 16]" \
    --set "calibration.data={format: npy, images: $tmp/x16.npy}" --set "evaluation.data={format: npy, images: $tmp/x16.npy}" \
    --set evaluation.metric=cosine "$@" --set output.dir="$tmp/bad"
}
bad bad_truncated.onnx 7 "bad_truncated.onnx: not an ONNX model"
bad bad_domain.onnx 5 "domain 'com.example'"
bad bad_opset11.onnx 5 "bad_opset11.onnx: opset 11; qfx reads opset 13 and newer .*onnx.version_converter.convert_version"
bad bad_op.onnx 5 "\\(NonMaxSuppression\\): qfx does not read this op type \\(it reads: .*Conv"
bad small_cnn.onnx 3 "model.input_shape \\[\\?, 1, 28, 28\\] does not fit .*small_cnn.onnx's input 'input' \\[\\?, 3, 16, 16\\]" \
  --set "model.input_shape=[-1, 1, 28, 28]"
check "--set model.input_shape=null takes the ONNX model's own shape over the default config's" 0 "output: cosine int8 vs fp32" -- \
  "$QFX" ptq --set model.path="$FIXTURES/small_cnn.onnx" --set model.input_shape=null \
    --set "calibration.data={format: npy, images: $tmp/x16.npy}" --set "evaluation.data={format: npy, images: $tmp/x16.npy}" \
    --set evaluation.metric=cosine --set output.dir="$tmp/null_shape"
bad bad_external.onnx 7 "external data location '../outside.bin' is not a file inside the model's folder"
bad static_batch.onnx 3 "static batch of 2; .* export the model with a dynamic batch"
check "an ONNX input with a dynamic height and no model.input_shape" 3 "dynamic dims past the batch; give its shape .model.input_shape" -- \
  bash -c "printf 'model: {path: $FIXTURES/bad_dynamic_dim.onnx}\ncalibration: {data: {format: npy, images: $tmp/x32.npy}}\n' > '$tmp/dyn.yaml' &&
           '$QFX' ptq '$tmp/dyn.yaml'"
# An input that declares no shape at all: without model.input_shape the config is asked for it;
# with one, the config's shape is taken.
$PY -c "
import onnx
from onnx import helper, TensorProto
io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ('x', 'y')]
g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g', io[:1], io[1:])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]), '$tmp/noshape.onnx')"
check "an ONNX input with no declared shape and no model.input_shape: asks for it" 3 "input 'x' declares no shape; give it in the config \\(model.input_shape" -- \
  "$QFX" ptq --set model.path="$tmp/noshape.onnx" --set model.input_shape=null \
    --set "calibration.data={format: npy, images: $tmp/x16.npy}" --set evaluation=null --set output.dir="$tmp/bad"
check "an ONNX input with no declared shape takes model.input_shape" 0 "wrote model_int8.onnx" -- \
  "$QFX" ptq --set model.path="$tmp/noshape.onnx" --set "model.input_shape=[-1, 3, 16, 16]" \
    --set "calibration.data={format: npy, images: $tmp/x16.npy}" --set evaluation=null --set output.dir="$tmp/noshape_out"
test ! -e "$tmp/bad" || { echo "FAIL a refused model left an output folder"; fail=$((fail+1)); }

check_encodings "$tmp"
echo "onnx input tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
