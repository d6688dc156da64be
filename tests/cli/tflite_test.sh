#!/usr/bin/env bash
# TFLite output (docs/targets.md, "TFLite and Ethos-U"): qfx ptq for the tflite_like
# target writes model_int8.tflite; LiteRT's interpreter (ai-edge-litert) gives the
# same int8 outputs as qfx's reference backend on every test image; Arm's Vela
# compiles it for Ethos-U55 and U65 with every op on the NPU; a model TFLite's int8
# scheme cannot take is a clear error that writes nothing.
# Needs $QFX, $FIXTURES; $1 = tools/tflite.
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"
PY=${TFLITE_PY:-$PY}   # the Python with ai-edge-litert and ethos-u-vela
tools=$1
vela=$(cd "$(dirname "$(command -v "$PY")")" && pwd)/vela
quick=(--set calibration.num_samples=256 --set evaluation.num_samples=1000 --set evaluation.sqnr_samples=16)

check "tflite_like: qfx ptq writes model_int8.tflite beside the ONNX model" 0 "model_int8.tflite: [0-9]+ TFLite ops" -- \
  "$QFX" ptq --set backend=tflite_like --set 'output.formats=[onnx, tflite]' "${quick[@]}" --set output.dir="$tmp/fm"
# 1,000 Fashion-MNIST test images, normalised as the default config does.
$PY -c "
import gzip, numpy as np
raw = gzip.open('/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz').read()[16:]
x = np.frombuffer(raw, np.uint8).reshape(-1, 1, 28, 28)[:1000].astype(np.float32) / 255
np.save('$tmp/x.npy', ((x - 0.2860) / 0.3530).astype(np.float32))"
# same_as_litert WHAT DIR: LiteRT's reference int8 kernels on DIR/model_int8.tflite give
# the int8 outputs of qfx's reference backend on DIR/model_int8.onnx, on all 1000 images.
same_as_litert() {
  "$QFX" run "$2/model_int8.onnx" -i "$tmp/x.npy" -o "$2/qfx_ref.npy" --backend reference >/dev/null
  check "$1: LiteRT's reference int8 kernels equal qfx's reference backend on all 1000 images" 0 \
    "1000 of 1000 samples identical" -- $PY "$tools/litert_check.py" "$2/model_int8.tflite" "$tmp/x.npy" "$2/qfx_ref.npy" --kernels reference
}
same_as_litert "Fashion-MNIST ResNet" "$tmp/fm"
# Depthwise convolutions and fused RELU6: the Fashion-MNIST MobileNet.
check "Fashion-MNIST MobileNet: DEPTHWISE_CONV_2D in the .tflite" 0 "DEPTHWISE_CONV_2D x[0-9]+" -- \
  "$QFX" ptq --set model.path="$FIXTURES/fashion_mobilenet.pt" --set backend=tflite_like --set 'output.formats=[onnx, tflite]' \
    --set calibration.num_samples=128 --set evaluation.num_samples=300 --set evaluation.sqnr_samples=8 --set output.dir="$tmp/mb"
same_as_litert "Fashion-MNIST MobileNet" "$tmp/mb"
# LOGISTIC, TANH and SOFTMAX: a gated CNN (tanh after a convolution, a * sigmoid(b),
# a linear head; random weights), and the same with softmaxes over the channels and
# over the classes. TFLite's int8 kernels fix their output qparams and compute their
# own tables; qfx's arithmetic must equal them code for code.
$PY -W ignore - "$tmp/gated.pt" "$tmp/gated_softmax.pt" "$tmp/hswish.pt" "$tmp/pooled.pt" <<'PYEOF'
import sys, torch, torch.nn as nn
class Gated(nn.Module):
    def __init__(s, act, softmax, pool=False):
        super().__init__()
        s.c1 = nn.Conv2d(1, 8, 3, stride=1 if pool else 2, padding=1)
        s.pool = nn.MaxPool2d(3, 2, 1) if pool else nn.Identity()  # torchvision ResNet's stem pool
        s.a, s.b = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        s.fc, s.act, s.softmax = nn.Linear(8 * 14 * 14, 10), act, softmax
    def forward(s, x):
        x = s.pool(s.act(s.c1(x)))
        x = s.a(x) * torch.sigmoid(s.b(x))
        if s.softmax:
            x = torch.softmax(x, 1)
        x = s.fc(torch.flatten(x, 1))
        return torch.softmax(x, -1) if s.softmax else x
models = [Gated(nn.Tanh(), False), Gated(nn.Tanh(), True), Gated(nn.Hardswish(), False), Gated(nn.ReLU(), False, True)]
for path, m in zip(sys.argv[1:], models):
    torch.manual_seed(0)
    torch.jit.trace(m.eval(), torch.randn(1, 1, 28, 28)).save(path)
PYEOF
check "gated CNN with softmaxes: LOGISTIC, SOFTMAX and TANH in the .tflite" 0 "LOGISTIC x1.*SOFTMAX x2.*TANH x1" -- \
  "$QFX" ptq --set model.path="$tmp/gated_softmax.pt" --set backend=tflite_like --set 'output.formats=[onnx, tflite]' \
    --set calibration.num_samples=128 --set evaluation.num_samples=200 --set evaluation.sqnr_samples=8 --set output.dir="$tmp/gated"
same_as_litert "gated CNN with softmaxes" "$tmp/gated"
# Max pooling with pads that are neither SAME nor VALID (3x3, stride 2, pad 1): PADV2
# with the lowest code, then a VALID MAX_POOL_2D.
check "max pool 3x3 / 2 with pad 1: PADV2 then MAX_POOL_2D" 0 "MAX_POOL_2D x1.*PADV2 x1" -- \
  "$QFX" ptq --set model.path="$tmp/pooled.pt" --set backend=tflite_like --set 'output.formats=[onnx, tflite]' "${quick[@]}" \
    --set output.dir="$tmp/pooled"
same_as_litert "max pool with explicit pads" "$tmp/pooled"
check "a HardSwish table (tflite_like's lut) has no TFLite op: exit 5 naming the node, nothing written" 5 \
  "QLut '.*': a table of HardSwish has no TFLite int8 op" -- \
  "$QFX" ptq --set model.path="$tmp/hswish.pt" --set backend=tflite_like --set 'output.formats=[onnx, tflite]' "${quick[@]}" \
    --set output.dir="$tmp/hswish"
check "... and no output folder is left" 0 "^ok" -- bash -c "[ ! -e '$tmp/hswish' ] && echo ok"
sed 's/sigmoid: {fixed: \[0.0, 1.0\]}/sigmoid: quantized/' "$(dirname "$0")/../../configs/backends/tflite_like.yaml" > "$tmp/sig_calibrated.yaml"
check "sigmoid with calibrated (not fixed) output qparams + tflite: exit 6, TFLite's fixed ones named" 6 \
  "LOGISTIC takes 1/256 and -128" -- \
  "$QFX" ptq --set model.path="$tmp/gated.pt" --set backend="$tmp/sig_calibrated.yaml" --set 'output.formats=[onnx, tflite]' \
    "${quick[@]}" --set output.dir="$tmp/sig_calibrated"
# int8 inputs and outputs (output.tflite_io: int8): what an NPU compiler places whole.
check "output.tflite_io: int8 writes int8 inputs and outputs" 0 "inputs int8 NHWC" -- \
  "$QFX" ptq --set backend=tflite_like --set 'output.formats=[onnx, tflite]' --set output.tflite_io=int8 \
    --set calibration.num_samples=64 --set evaluation.num_samples=64 --set evaluation.sqnr_samples=8 --set output.dir="$tmp/fm8"
same_as_litert "... on its int8 inputs" "$tmp/fm8"
check "... LiteRT reads them as int8 tensors" 0 "^ok" -- $PY -c "
from ai_edge_litert import interpreter as litert
import numpy as np
it = litert.Interpreter(model_path='$tmp/fm8/model_int8.tflite')
i, o = it.get_input_details()[0], it.get_output_details()[0]
print('ok' if i['dtype'] == np.int8 and o['dtype'] == np.int8 and list(i['shape']) == [1, 28, 28, 1] else 'bad', i['dtype'], o['dtype'], i['shape'])"
for acc in ethos-u55-128 ethos-u65-256; do
  check "Vela compiles it for $acc with at least 95 % of the ops on the NPU" 0 "^ok" -- bash -c \
    "'$vela' --accelerator-config $acc --verbose-cycle-estimate --output-dir '$tmp/vela_$acc' '$tmp/fm8/model_int8.tflite' \
       > '$tmp/vela_$acc.log' 2>&1 && $PY '$tools/vela_summary.py' '$tmp/vela_$acc.log' --min-npu 0.95"
done

# The ethos_u target (configs/backends/ethos_u.yaml): tflite_like's arithmetic, the
# ops Ethos-U runs (SOFTMAX included). Its model equals LiteRT bit for bit, Vela
# places every op on the NPU, and an op the target keeps float is refused by the
# TFLite writer.
check "ethos_u: the gated CNN with softmaxes quantizes for the NPU target" 0 "LOGISTIC x1.*SOFTMAX x2" -- \
  "$QFX" ptq --set model.path="$tmp/gated_softmax.pt" --set backend=ethos_u --set 'output.formats=[onnx, tflite]' \
    --set calibration.num_samples=128 --set evaluation.num_samples=200 --set evaluation.sqnr_samples=8 --set output.dir="$tmp/eu"
same_as_litert "ethos_u" "$tmp/eu"
check "ethos_u, int8 inputs and outputs (output.tflite_io: int8)" 0 "inputs int8 NHWC" -- \
  "$QFX" ptq --set model.path="$tmp/gated_softmax.pt" --set backend=ethos_u --set 'output.formats=[onnx, tflite]' --set output.tflite_io=int8 \
    --set calibration.num_samples=64 --set evaluation.num_samples=64 --set evaluation.sqnr_samples=8 --set output.dir="$tmp/eu8"
same_as_litert "... on its int8 inputs" "$tmp/eu8"
check "... Vela places every op on ethos-u55-128" 0 "^ok NPU [0-9]+ ops, CPU 0" -- bash -c \
  "'$vela' --accelerator-config ethos-u55-128 --verbose-cycle-estimate --output-dir '$tmp/vela_eu' '$tmp/eu8/model_int8.tflite' \
     > '$tmp/vela_eu.log' 2>&1 && $PY '$tools/vela_summary.py' '$tmp/vela_eu.log' --min-npu 1.0"
check "ethos_u keeps HardSwish float: the TFLite writer refuses it, exit 5 naming the node" 5 "HardSwish '.*'.* runs in float" -- \
  "$QFX" ptq --set model.path="$tmp/hswish.pt" --set backend=ethos_u --set 'output.formats=[onnx, tflite]' "${quick[@]}" \
    --set output.dir="$tmp/eu_hswish"

# uint8 activations (the onednn target) are not TFLite's int8 scheme: exit 6, the node named, nothing written.
check "onednn target (uint8 activations) + tflite: a clear error naming the node, exit 6" 6 \
  "QuantizeLinear '.*'.*int8" -- \
  "$QFX" ptq --set 'output.formats=[onnx, tflite]' "${quick[@]}" --set output.dir="$tmp/u8"
check "... and no output folder is left" 0 "^ok" -- bash -c "[ ! -e '$tmp/u8' ] && echo ok"
check "a layer kept float (qconfig.module_name fc: null) + tflite: exit 5 naming the node, nothing written" 5 \
  "model_int8.onnx: Gemm 'fc' runs in float.*TFLite" -- \
  "$QFX" ptq --set backend=tflite_like --set 'output.formats=[onnx, tflite]' --set 'qconfig.module_name={fc: null}' "${quick[@]}" \
    --set output.dir="$tmp/float_fc"
check "... and no output folder is left" 0 "^ok" -- bash -c "[ ! -e '$tmp/float_fc' ] && echo ok"
check "output.formats with an unknown format: config error naming the key" 3 "output.formats" -- \
  "$QFX" ptq --set 'output.formats=[onnx, tflite, coreml]' --set output.dir="$tmp/bad"

check_encodings "$tmp"
echo "tflite_tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
