#!/usr/bin/env bash
# torchvision architectures through qfx ptq (random weights, 64x64 inputs): EfficientNet
# (SiLU), GoogLeNet (named-tuple output with absent aux logits), ShuffleNetV2 (size(),
# view with computed shapes, transpose, chunk). Each: int8 output cosine >= 0.98
# against fp32, the reference backend equal to onednn, ONNX Runtime predicting the same
# class on every sample. Needs $QFX, $FIXTURES; $1 = tools/ort_check.
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"
ort=$1
# qfx ptq ARCH on DATA.npy (32 random inputs, INPUT_SHAPE), cosine metric; every
# int8 output equal to the reference backend's.
ptq_arch() {  # ARCH DATA INPUT_SHAPE
  check "qfx ptq $1" 0 "reference backend: 32 of 32 int8 outputs identical" -- \
    "$QFX" ptq --set model.path="$FIXTURES/$1.pt" --set "model.input_shape=$3" \
    --set "calibration.data={format: npy, images: $tmp/$2.npy}" --set calibration.num_samples=32 --set calibration.batch_size=16 \
    --set "evaluation.data={format: npy, images: $tmp/$2.npy}" --set evaluation.metric=cosine --set evaluation.reference_check=-1 \
    --set evaluation.sqnr_samples=0 --set output.dir="$tmp/$1"
}
# ONNX Runtime runs ARCH's int8 model on DATA.npy: the same class on every sample as
# qfx run, but for near-ties (qfx's scores of the two classes within the largest
# difference between the outputs: ONNX Runtime sums a float pool's inputs in float,
# qfx in integers, so a code may differ by one step), every output within 5% of the
# largest; report.json records the versions (qfx's, libtorch's, ONNX Runtime's).
ort_agrees() {  # ARCH DATA
  check "$1: ONNX Runtime runs the int8 model and agrees" 0 "^ok" -- bash -c \
    "'$QFX' run '$tmp/$1/model_int8.onnx' -i '$tmp/$2.npy' -o '$tmp/$1.qfx.npy' >/dev/null &&
     ORT_OPT=disabled $PY '$ort/run.py' --report '$tmp/$1/report.json' '$tmp/$1/model_int8.onnx' '$tmp/$1.ort.npy' '$tmp/$2.npy' 2>/dev/null &&
     $PY -c \"
import numpy as np; a, b = np.load('$tmp/$1.qfx.npy'), np.load('$tmp/$1.ort.npy')
ka, kb = a.argmax(1), b.argmax(1); agree = float((ka == kb).mean()); d = float(np.abs(a - b).max() / np.abs(b).max())
step = float(np.abs(a - b).max()); swaps = np.nonzero(ka != kb)[0]
ties = all(a[r, ka[r]] - a[r, kb[r]] <= step * (1 + 1e-6) for r in swaps)
import json, onnxruntime; v = json.load(open('$tmp/$1/report.json'))['versions']
same_v = v['onnxruntime'] == onnxruntime.__version__ and v['libtorch'] and v['qfx']
print('ok' if a.shape == b.shape and ties and d < 0.05 and same_v else 'differ', agree, d, v)\""
}

# Classification: torchvision CNNs on 64x64 inputs, the architectures given.
classify() {
$PY -c "import numpy; numpy.save('$tmp/x.npy', numpy.random.default_rng(0).normal(0, 1, (32, 3, 64, 64)).astype(numpy.float32))"
for arch in "$@"; do
  ptq_arch "$arch" x "[-1, 3, 64, 64]"
  check "$arch: int8 cosine against fp32 >= 0.98" 0 "^ok" -- $PY -c "
import json; c = json.load(open('$tmp/$arch/report.json'))['evaluation']['cosine_int8_vs_fp32']
print('ok' if c >= 0.98 else 'low', c)"
  ort_agrees "$arch" x
done
}
part_cnn_a() { classify efficientnet_b0 googlenet shufflenet_v2_x0_5 mobilenet_v3_small; }
part_cnn_b() { classify regnet_x_400mf densenet121 squeezenet1_0 mnasnet0_5; }

# Transformers, a 1-D audio CNN and normalisation layers.
part_transformers() {
# Transformers: nn.TransformerEncoder (batch first, post-norm and norm_first) on
# [N, 16, 32] tokens, a small torchvision ViT and a small Swin (shifted windows: roll,
# an attention mask built in place, the relative position bias folded at export).
# Tracing specialises the shape checks of MultiheadAttention and TransformerEncoder
# (dim() == 3 on a [-1, 16, 32] input); MultiheadAttention's projections (F.linear on
# its parameters) and the feed-forward linears (QLinearMatMul on 3-D tokens, oneDNN) and
# the attention matmuls between activations (QLinearMatMul, vectorised) all run int8;
# in torch 2.x MultiheadAttention calls scaled_dot_product_attention, which the tracer
# decomposes into those matmuls and a softmax.
$PY -c "import numpy; numpy.save('$tmp/tok.npy', numpy.random.default_rng(2).normal(0, 1, (32, 16, 32)).astype(numpy.float32))"
$PY -c "import numpy; numpy.save('$tmp/x32.npy', numpy.random.default_rng(3).normal(0, 1, (32, 3, 32, 32)).astype(numpy.float32))"
for spec in "transformer_encoder_post_norm:tok:[-1, 16, 32]" "transformer_encoder_norm_first:tok:[-1, 16, 32]" "vit_tiny:x32:[-1, 3, 32, 32]" \
            "swin_tiny:x32:[-1, 3, 32, 32]"; do
  arch=${spec%%:*}; rest=${spec#*:}; data=${rest%%:*}; shape=${rest#*:}
  ptq_arch "$arch" "$data" "$shape"
  check "$arch: int8 cosine against fp32 >= 0.98; every matmul int8 (projections, attention, feed-forward)" 0 "^ok" -- $PY -c "
import json; r = json.load(open('$tmp/$arch/report.json')); c = r['evaluation']['cosine_int8_vs_fp32']
mm = sum(1 for k in r['kernels'] if k['op'] == 'QLinearMatMul'); fm = sum(1 for k in r['kernels'] if k['op'] == 'MatMul')
print('ok' if c >= 0.98 and mm >= 12 and fm == 0 else 'low', c, mm, fm)"
  ort_agrees "$arch" "$data"
done
# Audio: a keyword-spotting 1-D CNN on [N, 40, 100] (Conv1d + BatchNorm1d + ReLU fused,
# MaxPool1d, AvgPool1d, AdaptiveAvgPool1d), every layer int8.
$PY -c "import numpy; numpy.save('$tmp/audio.npy', numpy.random.default_rng(4).normal(0, 1, (32, 40, 100)).astype(numpy.float32))"
ptq_arch kws_1d audio "[-1, 40, 100]"
check "kws_1d: int8 cosine against fp32 >= 0.98; every conv and pooling int8, nothing float" 0 "^ok" -- $PY -c "
import json; r = json.load(open('$tmp/kws_1d/report.json')); c = r['evaluation']['cosine_int8_vs_fp32']
ops = [k['op'] for k in r['kernels']]
fl = [k['op'] for k in r['kernels'] if k['dtype'] == 'float32' and k['op'] not in ('QuantizeLinear', 'DequantizeLinear', 'Identity')]
ok = c >= 0.98 and ops.count('QLinearConv') == 3 and 'QLinearAveragePool' in ops and 'QLinearGlobalAveragePool' in ops and not fl
print('ok' if ok else 'low', c, ops, fl)"
ort_agrees kws_1d audio
# GroupNorm and InstanceNorm2d: float between DequantizeLinear and QuantizeLinear on the
# built-in targets (as LayerNorm), the convolutions int8.
ptq_arch norm_net x32 "[-1, 3, 32, 32]"
check "norm_net: int8 cosine against fp32 >= 0.98; convs int8, the norms float" 0 "^ok" -- $PY -c "
import json; r = json.load(open('$tmp/norm_net/report.json')); c = r['evaluation']['cosine_int8_vs_fp32']
ops = [k['op'] for k in r['kernels']]
ok = c >= 0.98 and ops.count('QLinearConv') == 2 and 'ReduceMean' in ops
print('ok' if ok else 'low', c, ops)"
ort_agrees norm_net x32
}

# Segmentation: dictionary outputs, mean IoU, per-pixel labels, QAT.
part_segmentation() {
# Segmentation: torchvision's LRASPP and DeepLabV3 (MobileNetV3-Large) return
# {"out": [N, 21, H, W]}; evaluation.output names the key; the per-pixel classes of the
# int8 model against the fp32 model (mean IoU), and ONNX Runtime agreeing with qfx.
$PY -c "import numpy; numpy.save('$tmp/x64_16.npy', numpy.random.default_rng(5).normal(0, 1, (16, 3, 64, 64)).astype(numpy.float32))"
for arch in lraspp_mobilenet_v3_large deeplabv3_mobilenet_v3_large; do
  check "qfx ptq $arch (dictionary output 'out', mean IoU)" 0 "segmentation: mean IoU of int8 against fp32" -- \
    "$QFX" ptq --set model.path="$FIXTURES/$arch.pt" --set "model.input_shape=[-1, 3, 64, 64]" \
    --set "calibration.data={format: npy, images: $tmp/x64_16.npy}" --set calibration.batch_size=8 \
    --set "evaluation.data={format: npy, images: $tmp/x64_16.npy}" --set evaluation.batch_size=8 --set evaluation.metric=miou \
    --set evaluation.output=out --set evaluation.sqnr_samples=0 --set evaluation.reference_check=-1 --set output.dir="$tmp/$arch"
  check "$arch: int8 cosine >= 0.98, pixels agreeing >= 95%, the int8 model's output is named 'out'" 0 "^ok" -- $PY -c "
import json; r = json.load(open('$tmp/$arch/report.json'))['evaluation']
import onnx; names = [o.name for o in onnx.load('$tmp/$arch/model_int8.onnx').graph.output]
ok = r['cosine_int8_vs_fp32'] >= 0.98 and r['pixel_agreement'] >= 0.95 and names == ['out']
print('ok' if ok else 'low', r['cosine_int8_vs_fp32'], r['pixel_agreement'], r['miou_int8_vs_fp32'], names)"
  # ONNX Runtime: outputs at cosine >= 0.999 to qfx's, >= 99.9 % of pixels the same class
  # (a pixel whose two best classes are within an int8 step may swap).
  check "$arch: ONNX Runtime runs the int8 model and agrees" 0 "^ok" -- bash -c \
    "'$QFX' run '$tmp/$arch/model_int8.onnx' -i '$tmp/x64_16.npy' -o '$tmp/$arch.qfx.npy' >/dev/null &&
     ORT_OPT=disabled $PY '$ort/run.py' '$tmp/$arch/model_int8.onnx' '$tmp/$arch.ort.npy' '$tmp/x64_16.npy' 2>/dev/null &&
     $PY -c \"
import numpy as np; a, b = np.load('$tmp/$arch.qfx.npy'), np.load('$tmp/$arch.ort.npy')
c = float((a * b).sum() / np.linalg.norm(a) / np.linalg.norm(b)); px = float((a.argmax(1) == b.argmax(1)).mean())
print('ok' if a.shape == b.shape and c >= 0.999 and px >= 0.999 else 'differ', c, px)\""
done
# Per-pixel labels [N, H, W] (255: unlabelled): the float model's classes with a
# 2-pixel unlabelled border and every 7th pixel moved to the next class.
seg=lraspp_mobilenet_v3_large
$PY -c "
import numpy as np; y = np.load('$tmp/$seg.ort.npy').argmax(1).astype(np.int64)
y.reshape(-1)[::7] = (y.reshape(-1)[::7] + 1) % 21; y[:, :2] = y[:, -2:] = y[:, :, :2] = y[:, :, -2:] = 255
np.save('$tmp/seg_labels.npy', y)"
check "$seg: mean IoU against per-pixel labels, fp32 and int8" 0 "segmentation against the labels: mean IoU fp32" -- \
  "$QFX" ptq --set model.path="$FIXTURES/$seg.pt" --set "model.input_shape=[-1, 3, 64, 64]" \
  --set "calibration.data={format: npy, images: $tmp/x64_16.npy}" --set calibration.batch_size=8 \
  --set "evaluation.data={format: npy, images: $tmp/x64_16.npy, labels: $tmp/seg_labels.npy}" --set evaluation.batch_size=8 \
  --set evaluation.metric=miou --set evaluation.output=out --set evaluation.sqnr_samples=0 --set output.dir="$tmp/seg_labels"
# The expectation: NumPy's mean IoU of ONNX Runtime's fp32 and int8 class maps against the labels.
check "$seg: the reported mean IoU against the labels equals NumPy's on ONNX Runtime's outputs" 0 "^ok" -- bash -c \
  "ORT_OPT=disabled $PY '$ort/run.py' '$tmp/seg_labels/model_fp32.onnx' '$tmp/seg_fp.npy' '$tmp/x64_16.npy' 2>/dev/null &&
   ORT_OPT=disabled $PY '$ort/run.py' '$tmp/seg_labels/model_int8.onnx' '$tmp/seg_q.npy' '$tmp/x64_16.npy' 2>/dev/null &&
   $PY -c \"
import json, numpy as np; y = np.load('$tmp/seg_labels.npy'); v = y != 255
def miou(p):
    p, l = p.argmax(1)[v], y[v]; ious = []
    for k in range(21):
        u = ((p == k) | (l == k)).sum()
        if u: ious.append(((p == k) & (l == k)).sum() / u)
    return float(np.mean(ious))
e = json.load(open('$tmp/seg_labels/report.json'))['evaluation']
f, q = miou(np.load('$tmp/seg_fp.npy')), miou(np.load('$tmp/seg_q.npy'))
ok = abs(e['miou_fp32_vs_labels'] - f) < 0.01 and abs(e['miou_int8_vs_labels'] - q) < 0.01 and e['labelled_pixels'] == int(v.sum())
print('ok' if ok else 'differ', e['miou_fp32_vs_labels'], f, e['miou_int8_vs_labels'], q, e['labelled_pixels'], int(v.sum()))\""
check "$seg: top1 with per-pixel labels is refused, naming the file (exit 6)" 6 "seg_labels.npy: evaluation.metric top1 needs one class per sample" -- \
  "$QFX" ptq --set model.path="$FIXTURES/$seg.pt" --set "model.input_shape=[-1, 3, 64, 64]" \
  --set "calibration.data={format: npy, images: $tmp/x64_16.npy}" \
  --set "evaluation.data={format: npy, images: $tmp/x64_16.npy, labels: $tmp/seg_labels.npy}" --set evaluation.output=out \
  --set output.dir="$tmp/seg_top1"
# Labels whose shape is not the class map's: named, exit 6 (PTQ's mean IoU, QAT's loss).
$PY -c "import numpy as np; np.save('$tmp/seg_rows.npy', np.zeros(16, np.int64))"
check "$seg: miou with a label per image instead of per pixel is refused, naming the file (exit 6)" 6 \
  "seg_rows.npy: evaluation.metric miou compares per-pixel labels \[16\] with the output's class map \[16, 64, 64\]" -- \
  "$QFX" ptq --set model.path="$FIXTURES/$seg.pt" --set "model.input_shape=[-1, 3, 64, 64]" \
  --set "calibration.data={format: npy, images: $tmp/x64_16.npy}" --set evaluation.metric=miou \
  --set "evaluation.data={format: npy, images: $tmp/x64_16.npy, labels: $tmp/seg_rows.npy}" --set evaluation.output=out \
  --set evaluation.sqnr_samples=0 --set output.dir="$tmp/seg_rows"
check "$seg: qfx qat with a label per image instead of per pixel is refused, naming the file (exit 6)" 6 \
  "seg_rows.npy: labels \[8\] do not match the model's predictions \[8, 64, 64\]" -- \
  "$QFX" qat --set model.path="$FIXTURES/$seg.pt" --set "model.input_shape=[-1, 3, 64, 64]" \
  --set "calibration.data={format: npy, images: $tmp/x64_16.npy}" --set calibration.num_samples=16 \
  --set "training.data={format: npy, images: $tmp/x64_16.npy, labels: $tmp/seg_rows.npy}" --set training.num_samples=16 \
  --set training.batch_size=8 --set training.epochs=1 \
  --set "evaluation.data={format: npy, images: $tmp/x64_16.npy, labels: $tmp/seg_labels.npy}" --set evaluation.batch_size=8 \
  --set evaluation.output=out --set evaluation.sqnr_samples=0 --set output.dir="$tmp/seg_rows_qat"
# qfx qat reads per-pixel labels: its loss is a per-pixel cross-entropy (255 ignored), its
# accuracies are over labelled pixels; the fp32 one equals NumPy's on ONNX Runtime's
# fp32 outputs. Batch-norm statistics stay frozen: this random-weight fixture's running
# statistics are far from its activations' (docs/zoo.md), and a training step would move
# them enough to change the class of most pixels.
check "$seg: qfx qat runs on per-pixel labels" 0 "top-1 on 16 images: fp32 " -- \
  "$QFX" qat --set model.path="$FIXTURES/$seg.pt" --set "model.input_shape=[-1, 3, 64, 64]" \
  --set "calibration.data={format: npy, images: $tmp/x64_16.npy}" --set calibration.num_samples=16 \
  --set "training.data={format: npy, images: $tmp/x64_16.npy, labels: $tmp/seg_labels.npy}" --set training.num_samples=16 \
  --set training.batch_size=8 --set training.epochs=1 --set training.freeze_bn_after=0 --set qconfig.global.weight.bits=8 \
  --set qconfig.global.weight.granularity=per_channel --set training.optimizer.lr=0.0001 \
  --set "evaluation.data={format: npy, images: $tmp/x64_16.npy, labels: $tmp/seg_labels.npy}" --set evaluation.batch_size=8 \
  --set evaluation.output=out --set evaluation.sqnr_samples=0 --set output.dir="$tmp/seg_qat"
check "$seg: QAT's accuracies are over labelled pixels (fp32: NumPy on ONNX Runtime's outputs); fake-quant and int8 within 0.05 of it" 0 "^ok" -- $PY -c "
import json, numpy as np; e = json.load(open('$tmp/seg_qat/report.json'))['evaluation']
y = np.load('$tmp/seg_labels.npy'); v = y != 255; p = np.load('$tmp/seg_fp.npy').argmax(1)
want = float((p == y)[v].mean()); ok = abs(e['top1_fp32'] - want) < 0.005 and all(e['top1_fp32'] - 0.05 <= e[k] <= 1 for k in ('top1_fakequant', 'top1_int8'))
print('ok' if ok else 'bad', e['top1_fp32'], want, e['top1_fakequant'], e['top1_int8'])"
}

# Detection: wrapped host post-processing; the tracer's rank checks.
part_detection() {
$PY -c "import numpy; numpy.save('$tmp/x32.npy', numpy.random.default_rng(3).normal(0, 1, (32, 3, 32, 32)).astype(numpy.float32))"
# A detector: backbone and two heads (int8, deployed), post-processing with
# torchvision's nms and data-dependent branches kept whole by a wrap entry and left to
# the host. No environment variable: torchvision's operator library loads by itself.
d=$tmp/detector
check "qfx ptq on a detector: the wrapped nms post-processing stays on the host" 0 \
  "host post-processing \(float, on the host; not in model_int8.onnx, whose outputs cls_head_3, box_head it reads\)" -- \
  env -u QFX_TORCHVISION_LIBRARY "$QFX" ptq --set model.path="$FIXTURES/detector_two_head.pt" --set "model.input_shape=[-1, 3, 32, 32]" \
    --set 'tracer.wrap=["module_type:DetectionPostProcess"]' \
    --set "calibration.data={format: npy, images: $tmp/x32.npy}" --set calibration.num_samples=32 --set calibration.batch_size=16 \
    --set "evaluation.data={format: npy, images: $tmp/x32.npy}" --set evaluation.metric=detection --set evaluation.sqnr_samples=0 \
    --set output.dir="$d"
check "detector: the report lists the host nodes; the int8 model holds backbone and heads (6 int8 convs, 2 outputs)" 0 "^ok" -- \
  $PY -c "
import json; r = json.load(open('$d/report.json')); h = r['host_postprocess']
convs = sum(1 for k in r['kernels'] if k['op'] == 'QLinearConv')
ok = h['model_outputs'] == ['cls_head_3', 'box_head'] and len(h['nodes']) == 1 and 'DetectionPostProcess' in h['nodes'][0]
print('ok' if ok and convs == 6 and r['evaluation']['cosine_int8_vs_fp32'] >= 0.98 else 'bad', h, convs)"
check "detector: ONNX Runtime agrees on both outputs; the host post-processing on the int8 outputs finds PyTorch's fp32 detections" 0 "^ok" -- bash -c \
  "'$QFX' run '$d/model_int8.onnx' -i '$tmp/x32.npy' -o '$tmp/det.npy' >/dev/null &&
   $PY '$ort/run.py' '$d/model_int8.onnx' '$tmp/det.ort.npy' '$tmp/x32.npy' 2>/dev/null &&
   $PY -c \"
import numpy as np, torch, torchvision
cls, box = np.load('$tmp/det.output_0.npy'), np.load('$tmp/det.output_1.npy')
ort = np.load('$tmp/det.ort.npy')
m = torch.jit.load('$FIXTURES/detector_two_head.pt')
ref = m(torch.from_numpy(np.load('$tmp/x32.npy')))
dets = m.post(torch.from_numpy(cls), torch.from_numpy(box))
found = [float((torchvision.ops.box_iou(r[:, :4], q[:, :4]).max(1).values > 0.5).float().mean()) for r, q in zip(ref, dets)]
same = cls.shape == (32, 1, 8, 8) and box.shape == (32, 4, 8, 8) and np.abs(ort - cls).max() <= 1e-6 * np.abs(cls).max()
print('ok' if same and np.mean(found) >= 0.9 else 'bad', same, np.mean(found))\""
# metric detection: qfx runs the host post-processing on its fp32 and int8 outputs and
# matches the boxes. Recomputed here with PyTorch's own fp32 model and the post-processing
# on qfx's int8 outputs (qfx run, above), greedy matching by torchvision's box_iou.
check "detector: report.json's box agreement equals PyTorch's recount (int8 boxes exactly; fp32 boxes and recall within 2%)" 0 "^ok" -- $PY -c "
import json, numpy as np, torch, torchvision
r = json.load(open('$d/report.json'))['evaluation']['detection']
m = torch.jit.load('$FIXTURES/detector_two_head.pt')
fp = m(torch.from_numpy(np.load('$tmp/x32.npy')))
q = m.post(torch.from_numpy(np.load('$tmp/det.output_0.npy')), torch.from_numpy(np.load('$tmp/det.output_1.npy')))
matched = 0
for a, b in zip(fp, q):
    iou = torchvision.ops.box_iou(a[:, :4], b[:, :4]) if len(a) and len(b) else torch.zeros(len(a), len(b))
    taken = set()
    for i in a[:, 4].argsort(descending=True).tolist():
        cand = [(float(iou[i, j]), j) for j in range(len(b)) if j not in taken and float(iou[i, j]) >= 0.5]
        if cand:
            taken.add(max(cand)[1]); matched += 1
fb, qb = sum(len(a) for a in fp), sum(len(b) for b in q)
ok = r['int8_boxes'] == qb and abs(r['fp32_boxes'] - fb) <= 0.02 * fb and abs(r['recall'] - matched / fb) <= 0.02 and r['recall'] >= 0.9
print('ok' if ok else 'bad', r, fb, qb, matched)"

# torchvision's RetinaNet (ResNet-50, feature pyramid, heads; 128x128, random weights) as
# tools/zoo/detection.py builds it: the network int8 and deployed; torchvision's own
# post-processing (anchors, decoding, top-k, NMS) kept whole by a wrap entry and left to
# the host; metric detection runs it on both models' outputs.
check "RetinaNet: scripted with its post-processing as a module of its own" 0 "^ok" -- $PY -c "
import sys, numpy as np, torch; sys.path.insert(0, '$ort/../zoo')
from detection import build_detector
det, net = build_detector('retinanet_resnet50_fpn')
torch.jit.script(det).save('$tmp/retina.pt')
np.save('$tmp/x128.npy', np.random.default_rng(3).normal(0, 1, (16, 3, 128, 128)).astype(np.float32)); print('ok')"
check "RetinaNet: qfx ptq leaves the post-processing to the host and compares the boxes" 0 \
  "detection \(host post-processing on each model's outputs, 16 images\)" -- \
  "$QFX" ptq --set model.path="$tmp/retina.pt" --set "model.input_shape=[-1, 3, 128, 128]" \
    --set 'tracer.wrap=["module_type:RetinaNetPostProcess"]' \
    --set "calibration.data={format: npy, images: $tmp/x128.npy}" --set calibration.num_samples=16 --set calibration.batch_size=8 \
    --set "evaluation.data={format: npy, images: $tmp/x128.npy}" --set evaluation.metric=detection \
    --set evaluation.batch_size=8 --set evaluation.sqnr_samples=0 --set evaluation.reference_check=0 --set output.dir="$tmp/retina"
check "RetinaNet: both head outputs within cosine 0.98 of fp32; 20 boxes per image each side; the host runs RetinaNetPostProcess" 0 "^ok" -- \
  $PY -c "
import json; r = json.load(open('$tmp/retina/report.json')); e = r['evaluation']; d = e['detection']
ok = len(e['outputs']) == 2 and all(o['cosine_int8_vs_fp32'] >= 0.98 for o in e['outputs'])
ok = ok and d['fp32_boxes'] == d['int8_boxes'] == 16 * 20 and d['matched'] > 0
ok = ok and any('RetinaNetPostProcess' in n for n in r['host_postprocess']['nodes'])
print('ok' if ok else 'bad', e['outputs'], d)"

# A wrapped part that reads the model's input leaves nothing to deploy: one error naming
# it (UnsupportedOpError, exit 5), and no output folder.
check "detector with its backbone wrapped too: nothing is left to deploy, named" 5 \
  "nothing is left to deploy: 'backbone: backbone \(wrapped module Sequential" -- \
  "$QFX" ptq --set model.path="$FIXTURES/detector_two_head.pt" --set "model.input_shape=[-1, 3, 32, 32]" \
    --set 'tracer.wrap=["module:backbone", "module_type:DetectionPostProcess"]' \
    --set "calibration.data={format: npy, images: $tmp/x32.npy}" --set calibration.num_samples=8 --set evaluation=null \
    --set output.dir="$tmp/detector_all_host"
check "detector with its backbone wrapped too: no output folder left behind" 0 "^ok" -- \
  bash -c "[ ! -e '$tmp/detector_all_host' ] && echo ok"

# Without an input shape the tracer cannot know the rank: the check is data-dependent.
check "TransformerEncoder needs model.input_shape's rank: a dynamic rank check names the line" 4 "transformer.py:[0-9]+.*give the input shape" -- \
  "$QFX" inspect "$FIXTURES/transformer_encoder_post_norm.pt"
check "qfx inspect --input-shape specialises the same checks" 0 "aten::(softmax|scaled_dot_product_attention)" -- \
  "$QFX" inspect "$FIXTURES/transformer_encoder_post_norm.pt" --input-shape=-1,16,32 --no-code
check "qfx inspect --input-shape with a non-integer: CLI11's conversion error" 104 "Could not convert: --input-shape" -- \
  "$QFX" inspect "$FIXTURES/transformer_encoder_post_norm.pt" --input-shape=-1,x,32

}

# $2 names the part to run (one ctest test each, so that they run side by side).
part=${2:?usage: zoo_test.sh ORT_CHECK_DIR cnn_a|cnn_b|transformers|segmentation|detection}
declare -F "part_$part" >/dev/null || { echo "zoo_test.sh: no part '$part'"; exit 2; }
"part_$part"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
