#!/usr/bin/env bash
# A target's integer arithmetic end to end (docs/targets.md):
# qfx ptq on example_accel (shift, 24-bit accumulator) and tflite_like (fixed
# point, LUT sigmoid) writes the arithmetic into the ONNX metadata and the integer
# parameters into encodings.json, the reference backend equals onednn bit for bit,
# ONNX Runtime (which ignores the metadata) agrees with qfx's ONNX arithmetic, and
# bad arithmetic sections are clear errors. Needs $QFX, $FIXTURES; $1 = tools/ort_check.
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"
ort=$1
quick=(--set calibration.num_samples=128 --set evaluation.num_samples=300 --set evaluation.reference_check=-1
       --set evaluation.sqnr_samples=64)

check "example_accel: ptq runs its own arithmetic, reference == onednn on every image" 0 \
  "reference backend: 300 of 300 int8 outputs identical" -- \
  "$QFX" ptq --set backend=example_accel --set qconfig.global.weight.granularity=per_tensor "${quick[@]}" \
    --set output.dir="$tmp/acc"
check "example_accel: metadata, shift multipliers in encodings.json, the comparison in report.json" 0 "^ok" -- \
  $PY -c "
import json
e = json.load(open('$tmp/acc/encodings.json')); r = json.load(open('$tmp/acc/report.json'))
a = e['arithmetic']; ops = e['integer_ops']
convs = [o for o in ops.values() if o['op'] == 'QLinearConv']
shifts = all(x['mode'] == 'shift' and all(m == 1 for m in x['fixed_multiplier']) and all(s <= 0 for s in x['shift'])
             for o in convs for x in o['rescales'])
adds = [x for o in ops.values() if o['op'] == 'QLinearAdd' for x in o['rescales']]
t = r['target_arithmetic']
ok = (a['requantize'] == 'shift' and a['accumulator_bits'] == 24 and len(convs) >= 5 and shifts
      and len(adds) == 9 and all(x['mode'] == 'fixed_point' and x['multiplier_bits'] == 16 for x in adds)
      and t['images'] == 64 and len(t['layers_vs_float_requantization']) > 5 and 0 < t['top1_float_requantization'] <= 1)
print('ok' if ok else 'bad', a, len(convs), len(adds))"
check "example_accel: report.html names the target arithmetic in words, not as JSON" 0 "^ok" -- $PY -c "
import re; h = open('$tmp/acc/report.html').read()
row = re.search(r'<th>target arithmetic</th><td>([^<]*)</td>', h)
print('ok' if row and row.group(1).startswith('requantize shift') and '{' not in row.group(1) else row and row.group(1))"
check "example_accel: the ONNX file carries qfx.arithmetic" 0 "^ok" -- \
  bash -c "grep -c qfx.arithmetic '$tmp/acc/model_int8.onnx' >/dev/null && echo ok"
# With labels but the cosine metric, no top-1 figure is printed or reported (only the
# metric's own lines), while the top-1 run above prints its top-1 with float requantization.
"$QFX" ptq --set backend=example_accel --set qconfig.global.weight.granularity=per_tensor --set evaluation.metric=cosine "${quick[@]}" --set evaluation.num_samples=64 \
  --set calibration.num_samples=64 --set output.dir="$tmp/acc_cos" >"$tmp/acc_cos.log" 2>&1
check "example_accel, cosine metric with labels: no top-1 lines, the cosine line" 0 "^ok" -- bash -c \
  "grep -q 'output: cosine int8 vs fp32' '$tmp/acc_cos.log' && grep -q 'target arithmetic vs float requantization' '$tmp/acc_cos.log' &&
   ! grep -qi 'top-1' '$tmp/acc_cos.log' && ! grep -q top1_float '$tmp/acc_cos/report.json' && echo ok"

# ONNX Runtime computes ONNX's arithmetic on the same QDQ file: it agrees with
# qfx run --onnx-arithmetic, and the target's own arithmetic moves the outputs a little.
$PY -c "import numpy; numpy.save('$tmp/x.npy', numpy.random.default_rng(0).normal(0, 1, (256, 1, 28, 28)).astype(numpy.float32))"
check "ONNX Runtime agrees with qfx's ONNX arithmetic on the example_accel model; the target's differs" 0 "^ok" -- bash -c \
  "'$QFX' run '$tmp/acc/model_int8.onnx' -i '$tmp/x.npy' -o '$tmp/onnx.npy' --onnx-arithmetic >/dev/null &&
   '$QFX' run '$tmp/acc/model_int8.onnx' -i '$tmp/x.npy' -o '$tmp/target.npy' >/dev/null &&
   ORT_OPT=disabled $PY '$ort/run.py' '$tmp/acc/model_int8.onnx' '$tmp/ort.npy' '$tmp/x.npy' &&
   $PY -c \"
import numpy as np; o, t, r = np.load('$tmp/onnx.npy'), np.load('$tmp/target.npy'), np.load('$tmp/ort.npy')
agree = float((o.argmax(1) == r.argmax(1)).mean()); d = float(np.abs(o - r).max() / np.abs(r).max())
moved = float(np.abs(t - o).max())
print('ok' if agree >= 0.98 and d < 0.05 and moved > 0 else 'differ', agree, d, moved)\""

# tflite_like on EfficientNet-B0 (64x64): its SE sigmoids become lookup tables.
$PY -c "import numpy; numpy.save('$tmp/x64.npy', numpy.random.default_rng(1).normal(0, 1, (16, 3, 64, 64)).astype(numpy.float32))"
check "tflite_like: EfficientNet-B0 with LUT sigmoids, reference == onednn" 0 "reference backend: 16 of 16 int8 outputs identical" -- \
  "$QFX" ptq --set model.path="$FIXTURES/efficientnet_b0.pt" --set 'model.input_shape=[-1, 3, 64, 64]' --set backend=tflite_like \
    --set "calibration.data={format: npy, images: $tmp/x64.npy}" --set calibration.num_samples=16 --set calibration.batch_size=8 \
    --set "evaluation.data={format: npy, images: $tmp/x64.npy}" --set evaluation.metric=cosine --set evaluation.reference_check=-1 \
    --set evaluation.sqnr_samples=4 --set output.dir="$tmp/eff"
check "tflite_like: fixed-point multipliers and 256-entry QLut tables in encodings.json" 0 "^ok" -- $PY -c "
import json
e = json.load(open('$tmp/eff/encodings.json')); ops = e['integer_ops']
luts = [o for o in ops.values() if o['op'] == 'QLut']
convs = [x for o in ops.values() if o['op'] == 'QLinearConv' for x in o['rescales']]
fixed = all(x['mode'] == 'fixed_point' and all(2**30 <= m < 2**31 for m in x['fixed_multiplier']) for x in convs)
ok = len(luts) >= 10 and all(len(o['table']) == 256 for o in luts) and len(convs) > 20 and fixed
print('ok' if ok else 'bad', len(luts), len(convs), fixed)"

check "example_accel: MobileNetV3-Small with LUT hardswish and hardsigmoid, reference == onednn" 0 \
  "reference backend: 16 of 16 int8 outputs identical" -- \
  "$QFX" ptq --set model.path="$FIXTURES/mobilenet_v3_small.pt" --set 'model.input_shape=[-1, 3, 64, 64]' --set backend=example_accel \
    --set qconfig.global.weight.granularity=per_tensor \
    --set "calibration.data={format: npy, images: $tmp/x64.npy}" --set calibration.num_samples=16 --set calibration.batch_size=8 \
    --set "evaluation.data={format: npy, images: $tmp/x64.npy}" --set evaluation.metric=cosine --set evaluation.reference_check=-1 \
    --set evaluation.sqnr_samples=4 --set output.dir="$tmp/mv3"
check "example_accel: MobileNetV3-Small's hardswish and hardsigmoid tables in encodings.json" 0 "^ok" -- $PY -c "
import json
ops = json.load(open('$tmp/mv3/encodings.json'))['integer_ops']
luts = [o for o in ops.values() if o['op'] == 'QLut']
print('ok' if len(luts) >= 20 and all(len(o['table']) == 256 and min(o['table']) >= -128 and max(o['table']) <= 127 for o in luts)
      else 'bad', len(luts))"
check "example_accel: qfx qat trains against its rounding; reference == onednn" 0 "reference backend: 200 of 200 int8 outputs identical" -- \
  "$QFX" qat --set backend=example_accel --set training.num_samples=2000 --set training.max_steps=20 \
    --set calibration.num_samples=128 --set evaluation.num_samples=200 --set evaluation.reference_check=-1 --set output.dir="$tmp/qat"

# int16 where int8 is not enough: auto_fallback moves two layers' outputs to s16 on
# tflite_like; their neighbours run as 16x8 layers (64-bit accumulators) on the
# reference kernels, identical across backends; ONNX Runtime reads the com.microsoft
# int16 Q/DQ and agrees with qfx's ONNX arithmetic.
check "tflite_like: auto_fallback moves two layers to int16, reference == onednn" 0 \
  "reference backend: 300 of 300 int8 outputs identical" -- \
  "$QFX" ptq --set backend=tflite_like "${quick[@]}" --set output.dir="$tmp/i16" \
    --set "ptq.auto_fallback={candidates: [int16], max_layers: 2, metric: sqnr, min_sqnr_db: 100, ranking_samples: 64, num_samples: 200}"
check "int16: s16 encodings, 16x8 integer ops, the s16 qconfigs in config_final.yaml" 0 "^ok" -- $PY -c "
import json, yaml
e = json.load(open('$tmp/i16/encodings.json')); r = json.load(open('$tmp/i16/report.json'))
s16 = [x for x in e['activations'].values() if x['dtype'] == 's16']
ops = e['integer_ops'].values()
wide_in = [o for o in ops if o['input_dtype'] == 'int16' and o['accumulator_bits'] == 64]
wide_out = [o for o in ops if o['output_dtype'] == 'int16']
steps = r['auto_fallback']['steps']
final = yaml.safe_load(open('$tmp/i16/config_final.yaml'))['qconfig']['module_name']
ok = (len(s16) >= 2 and all(x['quant_min'] == -32768 and x['quant_max'] == 32767 for x in s16) and len(wide_out) >= 2
      and len(wide_in) >= 1 and len(steps) == 2 and all(s['moved_to'] == 'int16' for s in steps)
      and all(final[s['layer']]['activation']['dtype'] == 's16' for s in steps))
print('ok' if ok else 'bad', len(s16), len(wide_in), len(wide_out), steps)"
check "ONNX Runtime runs the int16 QDQ model and agrees with qfx's ONNX arithmetic" 0 "^ok" -- bash -c \
  "'$QFX' run '$tmp/i16/model_int8.onnx' -i '$tmp/x.npy' -o '$tmp/i16_onnx.npy' --onnx-arithmetic >/dev/null &&
   ORT_OPT=disabled $PY '$ort/run.py' '$tmp/i16/model_int8.onnx' '$tmp/i16_ort.npy' '$tmp/x.npy' &&
   $PY -c \"
import numpy as np; o, r = np.load('$tmp/i16_onnx.npy'), np.load('$tmp/i16_ort.npy')
agree = float((o.argmax(1) == r.argmax(1)).mean()); d = float(np.abs(o - r).max() / np.abs(r).max())
print('ok' if agree >= 0.98 and d < 0.05 else 'differ', agree, d)\""
check "int16 on a target without s16: the key and the backend named" 3 "ptq.auto_fallback.candidates: backend 'onednn' offers no s16" -- \
  "$QFX" ptq --set "ptq.auto_fallback={candidates: [int16], metric: sqnr}" "${quick[@]}" --set output.dir="$tmp/bad_i16a"
check "an s16 qconfig on a target without s16" 3 "dtype s16 is not supported \\(backend allows u8\\)" -- \
  "$QFX" ptq --set "qconfig.module_name={stem.0: {activation: {dtype: s16}}}" "${quick[@]}" --set output.dir="$tmp/bad_i16b"
printf "name: t\nactivation: {dtypes: [s8], qschemes: [symmetric]}\nweight: {dtypes: [s8, s16], qschemes: [symmetric]}\nops: {conv2d: weighted}\n" > "$tmp/w16.yaml"
check "s16 weights in a backend file" 3 "w16.yaml:3:18: weight.dtypes: weights are 8-bit" -- \
  "$QFX" ptq --set backend="$tmp/w16.yaml" --set output.dir="$tmp/bad_i16c"

# Bad arithmetic sections: file:line:column and the ConfigError exit code.
head="name: t\nactivation: {dtypes: [s8], qschemes: [symmetric]}\nweight: {dtypes: [s8], qschemes: [symmetric]}\nops: {conv2d: weighted, sigmoid: float}\n"
printf "${head}arithmetic:\n  requantize: shift\n" > "$tmp/nopow2.yaml"
check "shift without power-of-two scales" 3 "nopow2.yaml:6:3: arithmetic: 'shift' requantization needs power-of-two scales" -- \
  "$QFX" ptq --set backend="$tmp/nopow2.yaml" --set output.dir="$tmp/bad1"
printf "${head}arithmetic:\n  lut: [sigmoid]\n" > "$tmp/lutfloat.yaml"
check "a LUT for an op the target runs in float" 3 "lutfloat.yaml:6:8: arithmetic.lut: 'sigmoid' runs in float on this target" -- \
  "$QFX" ptq --set backend="$tmp/lutfloat.yaml" --set output.dir="$tmp/bad2"
printf "${head}arithmetic:\n  requantize: fixed_point\n  multiplier_bits: 40\n" > "$tmp/bits.yaml"
check "a 40-bit multiplier" 3 "bits.yaml:7:20: arithmetic.multiplier_bits must be between 2 and 32" -- \
  "$QFX" ptq --set backend="$tmp/bits.yaml" --set output.dir="$tmp/bad3"
check "no output written for a bad target" 0 "^clean" -- bash -c "ls '$tmp' | grep -q '^bad' && echo written || echo clean"

check_encodings "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
