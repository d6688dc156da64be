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
"$QFX" run "$tmp/fm/model_int8.onnx" -i "$tmp/x.npy" -o "$tmp/fm_ref.npy" --backend reference >/dev/null
check "Fashion-MNIST ResNet: LiteRT's reference int8 kernels equal qfx's reference backend on all 1000 images" 0 \
  "1000 of 1000 samples identical" -- $PY "$tools/litert_check.py" "$tmp/fm/model_int8.tflite" "$tmp/x.npy" "$tmp/fm_ref.npy" --kernels reference
# Depthwise convolutions and fused RELU6: the Fashion-MNIST MobileNet.
check "Fashion-MNIST MobileNet: DEPTHWISE_CONV_2D in the .tflite" 0 "DEPTHWISE_CONV_2D x[0-9]+" -- \
  "$QFX" ptq --set model.path="$FIXTURES/fashion_mobilenet.pt" --set backend=tflite_like --set 'output.formats=[onnx, tflite]' \
    --set calibration.num_samples=128 --set evaluation.num_samples=300 --set evaluation.sqnr_samples=8 --set output.dir="$tmp/mb"
"$QFX" run "$tmp/mb/model_int8.onnx" -i "$tmp/x.npy" -o "$tmp/mb_ref.npy" --backend reference >/dev/null
check "Fashion-MNIST MobileNet: LiteRT's reference int8 kernels equal qfx's reference backend on all 1000 images" 0 \
  "1000 of 1000 samples identical" -- $PY "$tools/litert_check.py" "$tmp/mb/model_int8.tflite" "$tmp/x.npy" "$tmp/mb_ref.npy" --kernels reference
# int8 inputs and outputs (output.tflite_io: int8): what an NPU compiler places whole.
check "output.tflite_io: int8 writes int8 inputs and outputs" 0 "inputs int8 NHWC" -- \
  "$QFX" ptq --set backend=tflite_like --set 'output.formats=[onnx, tflite]' --set output.tflite_io=int8 \
    --set calibration.num_samples=64 --set evaluation.num_samples=64 --set evaluation.sqnr_samples=8 --set output.dir="$tmp/fm8"
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
