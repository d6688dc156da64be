#!/usr/bin/env bash
# QAT as users run it, on a subset of Fashion-MNIST: the README's example loop, and
# qfx qat with a checkpoint and a resume. Needs: $QFX, $QAT_EXAMPLE, $FIXTURES.
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"

check "example: a libtorch loop with prepare_qat_fx, 4-bit weights" 0 "fake-quant top-1 on 500 test images" -- \
  "$QAT_EXAMPLE" "$FIXTURES/fashion_mobilenet.pt" "$tmp/example" 60 4000 500
check "example: int8 model and encodings written" 0 "graph_hash" -- cat "$tmp/example/encodings.json"
check "example: its int8 model runs on the runtime" 0 "output: \\[500, 10\\]" -- bash -c \
  "$PY -c \"import gzip, numpy as np; d = np.frombuffer(gzip.open('/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz').read()[16:], np.uint8).reshape(-1, 1, 28, 28)[:500]; np.save('$tmp/x.npy', ((d / 255.0 - 0.2860) / 0.3530).astype(np.float32))\" && '$QFX' run '$tmp/example/model_int8.onnx' -i '$tmp/x.npy'"

common=(--set training.num_samples=4000 --set evaluation.num_samples=1000 --set calibration.num_samples=256
        --set training.freeze_bn_after=40 --set training.disable_observer_after=50)
check "qfx qat: trains, converts, evaluates" 0 "top-1 on 1000 images: fp32 .*QAT fake-quant .*int8" -- \
  "$QFX" qat "${common[@]}" --set training.max_steps=60 --set output.dir="$tmp/qat"
check "qfx qat: int8 on the runtime agrees with the fake-quant model" 0 "^agree" -- $PY -c "
import json
e = json.load(open('$tmp/qat/report.json'))['evaluation']
print('agree' if e['int8_agrees_with_fakequant'] >= 0.99 else 'disagree', e)"
check "qfx qat: the reference backend computes the same int8 outputs" 0 "^identical" -- $PY -c "
import json
r = json.load(open('$tmp/qat/report.json'))['evaluation']['reference_check']
print('identical' if r['images'] == 1000 and r['identical_outputs'] == 1000 else 'differ', r)"
check "qfx qat: resumes from its checkpoint" 0 "resumed from .*qat_checkpoint.pt at step 60" -- \
  "$QFX" qat "${common[@]}" --set training.max_steps=70 --set training.resume="$tmp/qat/qat_checkpoint.pt" \
  --set output.dir="$tmp/qat2"
check "qfx qat: training data needs labels" 3 "training.data.labels is required" -- \
  "$QFX" qat --set "training.data={format: idx, images: /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz}"
check "qfx qat: a checkpoint of another model is refused" 6 "belongs to another prepared graph" -- \
  "$QFX" qat "${common[@]}" --set model.path="$FIXTURES/fashion_resnet.pt" \
  --set training.resume="$tmp/qat/qat_checkpoint.pt" --set output.dir="$tmp/qat3"
check "qfx qat: training.device must name a device" 3 "training.device must be cpu, cuda or cuda:N, got 'gpu'" -- \
  "$QFX" qat --set training.device=gpu --set output.dir="$tmp/qat_gpu"
[ ! -e "$tmp/qat_gpu" ] && pass=$((pass + 1)) || { echo "FAIL: a refused config left $tmp/qat_gpu"; fail=$((fail + 1)); }
if nvidia-smi -L > /dev/null 2>&1; then  # a GPU here: training on it must work
  check "qfx qat: trains on the GPU (training.device: cuda)" 0 "top-1 on 1000 images: fp32 .*QAT fake-quant .*int8" -- \
    "$QFX" qat "${common[@]}" --set training.max_steps=60 --set training.device=cuda --set output.dir="$tmp/qat_cuda"
else
  check "qfx qat: training.device: cuda is refused without a device, with the reason" 3 \
    "training.device: cuda, but libtorch sees no CUDA device" -- "$QFX" qat --set training.device=cuda
fi
check "qfx qat: no training section" 3 "'training' is required for qfx qat" -- \
  "$QFX" qat "$(dirname "$0")/../../configs/ptq/default.yaml"

check_encodings "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
