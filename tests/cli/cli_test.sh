#!/usr/bin/env bash
# The qfx CLI as a user runs it: the wrap fixture shows one call_method node, and
# each bad input gives one clear line and its own exit code (never a crash).
# Needs: $QFX (the binary), $FIXTURES (exported fixtures).
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

source "$(dirname "$0")/check.sh"

check "qfx ops --backend onednn: the op catalog with the target's categories (elu, mish quantized; conv2d weighted; size float only)" 0 "^ok$" -- \
  bash -c "'$QFX' ops --backend onednn | awk '\$1 == \"elu\" && \$NF == \"quantized\" && /table/ {e = 1} \$1 == \"mish\" && \$NF == \"quantized\" {m = 1}
    \$1 == \"conv2d\" && \$NF == \"weighted\" {c = 1} \$1 == \"size\" && /float only/ {s = 1} END {print (e && m && c && s) ? \"ok\" : \"bad\"}'"
check "qfx ops --backend with a missing YAML file" 7 "no_such_target.yaml: cannot open" -- "$QFX" ops --backend "$tmp/no_such_target.yaml"
check "wrap fixture: _post_process is one call_method" 0 "call_method +_post_process +_post_process" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt"
check "code view" 0 "_post_process = self._post_process\(relu\)" -- "$QFX" inspect "$FIXTURES/wrap_example.pt"
check "code view is Python (torchvision's Sequential paths through getattr)" 0 "^compiles$" -- bash -c \
  "'$QFX' inspect '$FIXTURES/resnet18_scripted.pt' | sed -n '/^def forward/,\$p' > '$tmp/code.py' &&
   grep -q 'getattr(self.layer1, \"0\")' '$tmp/code.py' && $PY -c \"compile(open('$tmp/code.py').read(), 'code.py', 'exec'); print('compiles')\""
check "unwrapped, train mode: softmax only" 0 "aten::softmax" -- \
  "$QFX" inspect "$FIXTURES/wrap_example_unwrapped.pt" --train
check "--wrap from the command line" 0 "call_module +head +head" -- \
  "$QFX" inspect "$FIXTURES/custom_module.pt" --wrap module_type:DecodeHead
printf 'tracer:\n  wrap: ["function:topk_decode"]\n' > "$tmp/ok.yaml"
check "--config tracer.wrap" 0 "call_function +topk_decode +topk_decode" -- \
  "$QFX" inspect "$FIXTURES/function_call.pt" --config "$tmp/ok.yaml"

check "shipped example config" 0 "call_module +head +head" -- \
  "$QFX" inspect "$FIXTURES/custom_module.pt" --config "$(dirname "$0")/../../configs/examples/tracer_wrap.yaml"

check "torchvision::nms loads by itself; the post-processing is kept whole" 0 "call_module +post +post" -- \
  "$QFX" inspect "$FIXTURES/detector_nms.pt" --wrap module_type:NmsPostProcess
check "an operator no library registers names it and the key" 3 "operator 'qfx_missing::nms'.*model.libraries" -- \
  "$QFX" inspect "$FIXTURES/detector_missing_op.pt"
check "--library that does not exist" 7 "nothing.so: operator library not found" -- \
  "$QFX" inspect "$FIXTURES/detector_nms.pt" --library "$tmp/nothing.so"
check "model.libraries must be a list" 3 "model.libraries must be a list" -- \
  "$QFX" ptq --set model.libraries=lib.so --set output.dir="$tmp/bad_libs"

# Bad input: one line, distinct exit codes (IoError 7, TraceError 4, ConfigError 3).
check "missing file" 7 "^qfx: error: $tmp/none.pt: cannot open" -- "$QFX" inspect "$tmp/none.pt"
echo "not a model" > "$tmp/text.pt"
check "not TorchScript" 7 "text.pt: not a TorchScript archive" -- "$QFX" inspect "$tmp/text.pt"
head -c 3000 "$FIXTURES/wrap_example.pt" > "$tmp/cut.pt"
check "truncated archive" 7 "cut.pt: cannot load TorchScript archive" -- "$QFX" inspect "$tmp/cut.pt"
check "data-dependent branch" 4 "data_dependent.pt: code/__torch__.py:[0-9]+: .*data-dependent" -- \
  "$QFX" inspect "$FIXTURES/data_dependent.pt"
check "suggests the wrap" 4 "module_type:DecodeHead" -- "$QFX" inspect "$FIXTURES/custom_module.pt"
check "bad wrap kind" 3 "unknown kind 'klass'" -- "$QFX" inspect "$FIXTURES/wrap_example.pt" --wrap klass:X
printf 'tracer:\n  wrapp: []\n' > "$tmp/bad.yaml"
check "unknown config key" 3 "bad.yaml:2:3: unknown key 'wrapp'" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt" --config "$tmp/bad.yaml"
check "missing config" 7 "missing.yaml: cannot open config" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt" --config "$tmp/missing.yaml"
check "prepare_fx on example_accel: conv+bn+relu fused, pow2 weights" 0 "ConvBnReLU2d with weight s8 symmetric .*per-tensor pow2" -- \
  "$QFX" inspect "$FIXTURES/resnet18_scripted.pt" --backend example_accel --no-code
check "prepare_fx: wrapped call stays float" 0 "_post_process: wrapped call" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt" --backend onednn --no-code
check "prepare_qat_fx keeps batch norm for folding simulation" 0 "ConvBnReLU6_2d" -- \
  "$QFX" inspect "$FIXTURES/mobilenet_v2_scripted.pt" --backend onednn --qat --no-code
check "unknown backend lists the shipped ones" 3 "unknown backend 'tpu' \\(available: ethos_u, example_accel, onednn, reference" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt" --backend tpu
# A backend YAML's runtime: key (a built-in backend name, or a plug-in's with its library).
cfgs="$(dirname "$0")/../../configs/backends"
sed -e 's/^name: reference$/name: my_npu/' -e 's/^runtime: reference$/runtime: npu9/' "$cfgs/reference.yaml" > "$tmp/rt_unknown.yaml"
check "backend YAML: unknown runtime names file, line and the registered backends" 3 \
  "rt_unknown.yaml:[0-9]+:[0-9]+: runtime: unknown runtime backend 'npu9' \\(registered: [a-z, ]*onednn, reference" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt" --backend "$tmp/rt_unknown.yaml" --no-code
sed -e 's/^name: reference$/name: my_npu/' -e 's/^runtime: reference$/runtime: {backend: example_npu, plugins: [nothing.so]}/' \
  "$cfgs/reference.yaml" > "$tmp/rt_noplugin.yaml"
check "backend YAML: a missing runtime plug-in names file and line" 3 "rt_noplugin.yaml:[0-9]+:[0-9]+: runtime.plugins: '.*nothing.so' not found" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt" --backend "$tmp/rt_noplugin.yaml" --no-code
sed -e 's/^name: reference$/name: my_npu/' -e "s|^runtime: reference$|runtime: {backend: example_npu, plugins: [$PLUGIN]}|" \
  "$cfgs/reference.yaml" > "$tmp/rt_npu.yaml"
check "qfx ptq on a plug-in runtime: calibrates and runs int8 on example_npu" 0 "QLinearAdd on example_npu" -- \
  "$QFX" ptq --set backend="$tmp/rt_npu.yaml" --set calibration.num_samples=64 --set evaluation.num_samples=64 \
  --set evaluation.reference_check=-1 --set evaluation.sqnr_samples=0 --set output.dir="$tmp/ptq_npu"
printf 'qconfig:\n  global: {weight: {granularity: per_channel}}\n' > "$tmp/pc.yaml"
check "per-channel qconfig on a per-tensor backend names node and constraint" 3 "weight of node 'conv1'.*per-channel" -- \
  "$QFX" inspect "$FIXTURES/resnet18_scripted.pt" --backend example_accel --config "$tmp/pc.yaml"
check "qfx run: float model, summary with argmax" 0 "output: \\[2, 1000\\] float32 .*argmax" -- \
  "$QFX" run "$FIXTURES/onnx/resnet18.onnx" -i "$FIXTURES/onnx/resnet18.in.npy"
check "qfx run: int8 QDQ model on the reference backend" 0 "5 int8" -- \
  "$QFX" run "$FIXTURES/onnx/qdq_convnet.onnx" -i "input=$FIXTURES/onnx/qdq_convnet.in.npy" --backend reference -o "$tmp/q.npy"
check "qfx run: saved output" 0 "NUMPY" -- bash -c "head -c 6 \"$tmp/q.npy\" | tail -c 5"
check "qfx run: missing model" 7 "missing.onnx: cannot open ONNX model" -- \
  "$QFX" run "$tmp/missing.onnx" -i "$FIXTURES/onnx/zoo.in.npy"
head -c 1000 "$FIXTURES/onnx/resnet18.onnx" > "$tmp/trunc.onnx"
check "qfx run: truncated model" 7 "trunc.onnx: not an ONNX model" -- \
  "$QFX" run "$tmp/trunc.onnx" -i "$FIXTURES/onnx/zoo.in.npy"
check "qfx run: unsupported op names node and op" 5 "Det 'det_1': op 'Det' is not supported" -- \
  "$QFX" run "$FIXTURES/onnx/unsupported.onnx" -i "$FIXTURES/onnx/zoo.in.npy"
check "qfx run: wrong input shape" 6 "input 'input' has shape \\[2, 3, 64, 64\\], the model expects \\[\\?, 3, 16, 16\\]" -- \
  "$QFX" run "$FIXTURES/onnx/zoo.onnx" -i "$FIXTURES/onnx/resnet18.in.npy"
check "qfx run: unknown input name" 6 "unknown input 'image'" -- \
  "$QFX" run "$FIXTURES/onnx/zoo.onnx" -i "image=$FIXTURES/onnx/zoo.in.npy"
check "qfx ptq: default config on a subset, int8 top-1 reported" 0 "top-1: fp32 .*int8" -- \
  env -u OMP_NUM_THREADS "$QFX" ptq --set calibration.num_samples=512 --set evaluation.num_samples=2000 \
  --set evaluation.reference_check=-1 --set output.dir="$tmp/ptq"
check "qfx ptq: artifacts written" 0 "graph_hash" -- cat "$tmp/ptq/encodings.json"
# Threads: every CPU this process may use unless OMP_NUM_THREADS says otherwise
# (libtorch alone would start with its guess of the physical cores, 1 on some VMs).
check "qfx ptq without OMP_NUM_THREADS computes on all $(nproc) CPUs" 0 "^$(nproc)$" -- $PY -c \
  "import json; print(json.load(open('$tmp/ptq/report.json'))['calibration']['threads'])"
check "qfx ptq: OMP_NUM_THREADS=1 stands" 0 "on runtime:onednn \\(1 thread\\)" -- \
  env OMP_NUM_THREADS=1 "$QFX" ptq --set calibration.num_samples=64 --set evaluation=null --set output.dir="$tmp/ptq_t1"
# Output redirected: the header comes before the progress, and calibration states one rate.
check "qfx ptq: header first, one calibration rate" 0 "^ok" -- bash -c \
  "OMP_NUM_THREADS=1 '$QFX' ptq --set calibration.num_samples=256 --set calibration.batch_size=32 --set evaluation=null \
     --set output.dir='$tmp/ptq_rate' >'$tmp/rate.log' 2>&1 &&
   head -1 '$tmp/rate.log' | grep -q '^qfx ptq: ' &&
   [ \$(grep -i calibrat '$tmp/rate.log' | grep -cE '[0-9.]+ (images|img)/s') = 1 ] && echo ok || cat '$tmp/rate.log'"
# Acceptance on the subset: calibrated on the runtime, int8 top-1 within 0.5 points
# of fp32, the reference backend's int8 outputs identical to oneDNN's on every image.
check "qfx ptq: acceptance on 2,000 test images" 0 "^accepted" -- $PY -c "
import json, sys
r = json.load(open('$tmp/ptq/report.json'))
e = r['evaluation']
ok = r['calibration']['engine'] == 'runtime:onednn' and abs(e['top1_int8'] - e['top1_fp32']) <= 0.005 \
     and e['reference_check']['identical_outputs'] == e['reference_check']['images'] == 2000 \
     and e['fp32_runtime_vs_libtorch_max_rel_error'] < 1e-4 and len(r['per_layer_sqnr']['layers']) >= 10
print('accepted' if ok else 'rejected', r['calibration'], {k: e[k] for k in ('top1_fp32', 'top1_int8', 'reference_check')})
"
check "qfx ptq: per-layer SQNR table, worst first" 0 "^sorted" -- $PY -c "
import json
l = json.load(open('$tmp/ptq/report.json'))['per_layer_sqnr']['layers']
v = [x.get('sqnr_db_int8', x['sqnr_db_fakequant']) for x in l]
print('sorted' if v == sorted(v) and all(5 < x < 80 for x in v) else 'unsorted', v[:3])
"
$PY -c "import numpy; numpy.save('$tmp/img.npy', numpy.zeros((1, 1, 28, 28), numpy.float32))"
check "qfx ptq: model runs on the runtime" 0 "output: \\[1, 10\\]" -- \
  "$QFX" run "$tmp/ptq/model_int8.onnx" -i "$tmp/img.npy"
# The kernel registry as a user sees it: every int8 convolution of the job's model on
# oneDNN (no silent reference fallback), and the example plug-in running the same
# model with outputs identical to the reference backend's.
$PY -c "import numpy; numpy.save('$tmp/rnd.npy', numpy.random.default_rng(3).normal(0, 1, (16, 1, 28, 28)).astype(numpy.float32))"
check "qfx run --explain: every QLinearConv of the PTQ model runs on oneDNN" 0 "^all [0-9]+ QLinearConv on onednn$" -- bash -c \
  "out=\$('$QFX' run '$tmp/ptq/model_int8.onnx' -i '$tmp/rnd.npy' --explain) || exit 1
   n=\$(grep -cE '  QLinearConv  ' <<<\"\$out\"); d=\$(grep -E '  QLinearConv  ' <<<\"\$out\" | grep -vc '  onednn\$')
   [ \"\$n\" -gt 0 ] && [ \"\$d\" -eq 0 ] && echo \"all \$n QLinearConv on onednn\" || echo \"\$out\""
check "qfx run --plugin: the example NPU runs the PTQ model's QLinearAdd" 0 "QLinearAdd  example_npu" -- \
  "$QFX" run "$tmp/ptq/model_int8.onnx" -i "$tmp/rnd.npy" --plugin "$PLUGIN" --backend example_npu --explain -o "$tmp/npu.npy"
check "qfx run --plugin: outputs identical to the reference backend" 0 "^identical$" -- bash -c \
  "'$QFX' run '$tmp/ptq/model_int8.onnx' -i '$tmp/rnd.npy' --backend reference -o '$tmp/ref.npy' >/dev/null &&
   cmp -s '$tmp/npu.npy' '$tmp/ref.npy' && echo identical || echo different"
check "qfx run --plugin: a missing plug-in is a file error" 7 "nothing.so: runtime plug-in not found" -- \
  "$QFX" run "$tmp/ptq/model_int8.onnx" -i "$tmp/rnd.npy" --plugin "$tmp/nothing.so" --backend example_npu
check "qfx run: an unknown backend names the registered ones" 3 "unknown runtime backend 'npu9' \\(registered: .*onednn" -- \
  "$QFX" run "$tmp/ptq/model_int8.onnx" -i "$tmp/rnd.npy" --backend npu9
check "qfx ptq: the 4-bit preset runs AdaRound and bias correction (reduced iterations)" 0 "adaround: 10 layers" -- \
  "$QFX" ptq "$(dirname "$0")/../../configs/ptq/w4_per_tensor.yaml" --set ptq.adaround.iterations=20 \
  --set calibration.num_samples=128 --set evaluation.num_samples=500 --set evaluation.reference_check=500 \
  --set output.dir="$tmp/ptq_w4"
check "qfx ptq: each algorithm's per-layer effect in report.json" 0 "^reported" -- $PY -c "
import json
a = json.load(open('$tmp/ptq_w4/report.json'))['algorithms']
assert len(a['adaround']) == 10 and len(a['bias_correction']) == 10, a.keys()
assert all(l['sqnr_after_db'] >= l['sqnr_before_db'] for l in a['adaround'] + a['bias_correction'])
assert all(l['kept'] in ('adaround', 'nearest') for l in a['adaround'])
print('reported')"
# ptq.auto_fallback: an unreachable SQNR target moves max_layers layers to float; the
# written config_final.yaml reproduces the int8 model byte for byte.
check "qfx ptq: auto_fallback moves two layers and writes the config that reproduces them" 0 "^moved 2 reproduced$" -- bash -c \
  "'$QFX' ptq '$(dirname "$0")/../../configs/ptq/w4_per_tensor.yaml' --set 'ptq={}' \
     --set 'ptq.auto_fallback={metric: sqnr, min_sqnr_db: 99, max_layers: 2, num_samples: 256, ranking_samples: 64}' \
     --set calibration.num_samples=128 --set evaluation.num_samples=256 --set evaluation.reference_check=256 \
     --set evaluation.sqnr_samples=0 --set output.dir='$tmp/ptq_af' >'$tmp/af.log' 2>&1 || { cat '$tmp/af.log'; exit 1; }
   '$QFX' ptq '$tmp/ptq_af/config_final.yaml' --set output.dir='$tmp/ptq_af2' >/dev/null 2>&1 || exit 1
   $PY -c \"
import json, filecmp
r = json.load(open('$tmp/ptq_af/report.json'))
a = r['auto_fallback']; steps = [s['layer'] for s in a['steps']]
assert len(steps) == 2 and not a['reached'] and a['metric'] == 'sqnr', a
fb = ' '.join(r['float_fallbacks'])
assert all('module_name:' + s in fb for s in steps), (steps, fb)
assert 'auto_fallback' not in json.load(open('$tmp/ptq_af2/report.json'))
assert r['evaluation']['reference_check']['exact_expected'] is False, r['evaluation']['reference_check']  # float convs
same = all(filecmp.cmp('$tmp/ptq_af/' + f, '$tmp/ptq_af2/' + f, shallow=False) for f in ('model_int8.onnx', 'encodings.json'))
print('moved', len(steps), 'reproduced' if same else 'differs')\""
check "qfx ptq: evaluation.metric detection on a model without host post-processing is refused, and says what to wrap" 3 \
  "evaluation.metric detection .* has none left to the host: wrap the post-processing \(tracer.wrap" -- \
  "$QFX" ptq --set evaluation.metric=detection --set output.dir="$tmp/bad_detection"
check "qfx ptq: auto_fallback top1 without labels names the key" 3 "ptq.auto_fallback.metric top1 needs labels" -- \
  "$QFX" ptq --set ptq.auto_fallback=true --set output.dir="$tmp/bad_af"
check "qfx ptq: auto_fallback without held-out samples" 3 "ptq.auto_fallback has no held-out samples" -- \
  "$QFX" ptq --set "calibration.data={format: npy, images: $tmp/rnd.npy}" --set calibration.num_samples=16 \
  --set 'ptq.auto_fallback={metric: sqnr}' --set evaluation=null --set output.dir="$tmp/bad_af"
check "qfx ptq: range_search without histogram observers is refused before calibration" 3 \
  "ptq.range_search chooses among histogram algorithms, but no activation is observed by a histogram observer" -- \
  "$QFX" ptq --set ptq.range_search=true --set "qconfig.global.activation={observer: minmax}" --set output.dir="$tmp/bad_af"
check "qfx ptq: range_search's choice in report.json, printed with each candidate's SQNR" 0 "^chosen" -- bash -c \
  "'$QFX' ptq --set 'ptq.range_search={candidates: [minmax, mse], num_samples: 64}' --set calibration.num_samples=128 \
     --set evaluation=null --set output.dir='$tmp/ptq_rs' | grep -E '^range_search: output SQNR on 64 calibration samples: minmax .* dB, mse .* dB; chosen' >/dev/null &&
   $PY -c \"
import json; r = json.load(open('$tmp/ptq_rs/report.json'))['algorithms']['range_search']
c = {k['algorithm']: k['sqnr_db'] for k in r['candidates']}
assert set(c) == {'minmax', 'mse'} and r['chosen'] == max(c, key=c.get) and r['samples'] == 64, r
print('chosen', r['chosen'])\""
check "qfx ptq: failed auto_fallback runs leave no output" 0 "^none$" -- bash -c "[ -n \"\$(ls -A '$tmp/bad_af' 2>/dev/null)\" ] && ls -A '$tmp/bad_af' || echo none"
check "qfx ptq: calibration from a PNG/JPEG folder" 0 "calibration: 12 images on runtime:onednn" -- \
  "$QFX" ptq --set "calibration.data={format: images, images: $FIXTURES/images/small, resize: 28, crop: 28, color: gray}" \
  --set evaluation=null --set output.dir="$tmp/ptq_images"
check "qfx ptq: evaluation.metric cosine reports no top-1, evaluation.batch_size is its own" 0 "^cosine-only 32$" -- bash -c \
  "'$QFX' ptq --set calibration.num_samples=64 --set evaluation.num_samples=96 --set evaluation.metric=cosine \
     --set evaluation.batch_size=32 --set evaluation.reference_check=0 --set evaluation.sqnr_samples=0 \
     --set output.dir='$tmp/ptq_cos' >/dev/null 2>&1 && $PY -c \"
import json; e = json.load(open('$tmp/ptq_cos/report.json'))['evaluation']
print('cosine-only', e['batch_size']) if e['metric'] == 'cosine' and 'top1_int8' not in e and e['cosine_int8_vs_fp32'] > 0.99 else print(e)\""
# Bad input: one message naming the file or key, a distinct exit code, no output files.
check "qfx ptq: model file missing" 7 "none.pt: model file not found" -- \
  "$QFX" ptq --set model.path="$tmp/none.pt" --set output.dir="$tmp/bad1"
mkdir -p "$tmp/empty"
check "qfx ptq: empty data folder" 7 "empty: no .png, .jpg, .jpeg files" -- \
  "$QFX" ptq --set "calibration.data={format: images, images: $tmp/empty}" --set output.dir="$tmp/bad2"
check "qfx ptq: data folder missing" 7 "nowhere: not a folder" -- \
  "$QFX" ptq --set "calibration.data={format: images, images: $tmp/nowhere}" --set output.dir="$tmp/bad2"
# NaN in .npy data is refused naming the file and the first bad element; a 1-D array names the shape the model needs.
$PY -c "
import numpy as np
x = np.random.rand(16, 1, 28, 28).astype('float32'); x[3, 0, 1, 1] = np.inf; np.save('$tmp/inf.npy', x)
np.save('$tmp/one_d.npy', np.random.rand(100).astype('float32'))"
check "qfx ptq: Inf in .npy calibration data names the file and the element" 6 "inf.npy: 1 NaN or Inf value\\(s\\), the first at \\[3, 0, 1, 1\\] \\(sample 3\\)" -- \
  "$QFX" ptq --set "calibration.data={format: npy, images: $tmp/inf.npy}" --set output.dir="$tmp/inf_out"
check "qfx ptq: a 1-D .npy says what shape the data needs" 6 "one_d.npy: samples are scalars \\(a 1-D array \\[N\\]\\); the model input takes 1x28x28 per sample, so the data must be \\[N, 1, 28, 28\\]" -- \
  "$QFX" ptq --set "calibration.data={format: npy, images: $tmp/one_d.npy}" --set output.dir="$tmp/one_d_out"
# A truncated JPEG is refused (IoError naming the file), as PIL refuses it.
mkdir -p "$tmp/truncated_jpeg" && $PY -c "
import io, numpy as np
from PIL import Image
b = io.BytesIO(); Image.fromarray((np.random.rand(28, 28) * 255).astype('uint8')).save(b, 'JPEG')
open('$tmp/truncated_jpeg/a.jpg', 'wb').write(b.getvalue()[:len(b.getvalue()) // 2])"
check "qfx ptq: a truncated JPEG names the file" 7 "truncated_jpeg/a.jpg: cannot decode JPEG \\(Premature end of JPEG file\\)" -- \
  "$QFX" ptq --set "calibration.data={format: images, images: $tmp/truncated_jpeg, color: gray}" --set evaluation=null \
  --set output.dir="$tmp/truncated_out"
check "qfx ptq: image channels do not fit the model" 6 "samples are 3x28x28; the model input takes 1x28x28" -- \
  "$QFX" ptq --set "calibration.data={format: images, images: $FIXTURES/images/small, resize: 28, crop: 28}" \
  --set output.dir="$tmp/bad3"
check "qfx ptq: label count differs from the images" 6 "60000 labels for 10000 images" -- \
  "$QFX" ptq --set evaluation.data.labels=/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz \
  --set output.dir="$tmp/bad4"
check "qfx ptq: output directory not writable" 7 "cannot be created or written" -- \
  "$QFX" ptq --set calibration.num_samples=8 --set evaluation=null --set output.dir=/proc/qfx_out
check "qfx ptq: wrong type" 3 "calibration.num_samples" -- "$QFX" ptq --set calibration.num_samples=many
check "qfx ptq: resize on IDX data is rejected" 3 "resize, crop and color apply to format: images only" -- \
  "$QFX" ptq --set calibration.data.resize=32
check "qfx ptq: failed runs leave no output files" 0 "^clean$" -- bash -c \
  "ls -A '$tmp'/bad1 '$tmp'/bad2 '$tmp'/bad3 '$tmp'/bad4 2>/dev/null | grep -q . && echo dirty || echo clean"
check "qfx ptq: unknown config key" 3 "unknown key 'calibraton'" -- \
  "$QFX" ptq --set calibraton.num_samples=1
check "qfx ptq: --set reaches the qconfig section" 3 "qconfig.global.weight.bits must be between 2 and 8" -- \
  "$QFX" ptq --set qconfig.global.weight.bits=9
# --- More bad input (the README's catalogue): models, .npy files, configs, CLI. ---
$PY - "$tmp" <<'PY'
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
def save(name, nodes, inits, out_shape):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/{name}.onnx")
# Transpose naming an axis twice.
save("perm_twice", [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 1, 1, 2], name="tr")], {}, [2, 3, 3, 4])
# Transpose with negative perm entries (counted from the end): a valid permutation.
save("perm_negative", [helper.make_node("Transpose", ["x"], ["y"], perm=[0, -1, 1, 2], name="tr")], {}, [2, 5, 3, 4])
# QDQ with a Clip that has no max: int8 QClip with an infinite upper bound.
s, z = np.array(0.05, np.float32), np.array(128, np.uint8)
save("clip_no_max", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                     helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
                     helper.make_node("Clip", ["dq", "lo"], ["c"], name="clip"),
                     helper.make_node("QuantizeLinear", ["c", "s", "z"], ["q2"]),
                     helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"])],
     {"s": s, "z": z, "lo": np.array(-1.0, np.float32)}, [2, 3, 4, 5])
# Kernel audit: inputs that read past dims, overflowed or divided by zero before.
save("unsqueeze_twice", [helper.make_node("Unsqueeze", ["x", "a"], ["y"], name="us")], {"a": np.array([0, 0], np.int64)}, [1, 1, 2, 3, 4, 5])
save("pad_huge", [helper.make_node("Pad", ["x", "p"], ["y"], name="pad")], {"p": np.array([0, 0, 0, 1 << 50, 0, 0, 0, 0], np.int64)}, None)
save("reducemean_empty", [helper.make_node("Slice", ["x", "st", "en", "ax"], ["sl"]),
                          helper.make_node("ReduceMean", ["sl"], ["y"], axes=[2, 3], name="rm")],
     {"st": np.array([0], np.int64), "en": np.array([0], np.int64), "ax": np.array([1], np.int64)}, [2, 0, 1, 1])
save("matmul_scalar", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], {"w": np.array(2.0, np.float32)}, None)
save("pool_huge_stride", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1], strides=[1 << 33, 1], name="mp")], {}, None)
s8, z8 = np.array(0.05, np.float32), np.array(0, np.int8)
save("qmatmul_empty_weight", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                              helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
                              helper.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"]),
                              helper.make_node("MatMul", ["dq", "w"], ["m"], name="mm"),
                              helper.make_node("QuantizeLinear", ["m", "s", "z"], ["q2"]),
                              helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"])],
     {"s": s8, "z": z8, "wq": np.zeros((5, 0), np.int8)}, [2, 3, 4, 0])
# Graphs that break ONNX's single assignment: refused at load, before planning.
save("double_write", [helper.make_node("Relu", ["x"], ["t"], name="r1"), helper.make_node("Neg", ["x"], ["t"], name="r2"),
                      helper.make_node("Relu", ["t"], ["y"], name="r3")], {}, [2, 3, 4, 5])
save("writes_input", [helper.make_node("Relu", ["x"], ["x"], name="rx"), helper.make_node("Relu", ["x"], ["y"])], {}, [2, 3, 4, 5])
save("writes_initializer", [helper.make_node("Relu", ["x"], ["w"], name="rw"), helper.make_node("Add", ["x", "w"], ["y"])],
     {"w": np.zeros((1,), np.float32)}, [2, 3, 4, 5])
save("reads_undefined", [helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")], {}, [2, 3, 4, 5])
# Attributes and shapes a kernel divides or indexes by: a ConvTranspose group that does
# not divide the channels; a BatchNormalization of a 0-d input; Gemm without its
# optional C; zero-size batches through reductions, normalisation, int8 conv, Gemm.
ct_w = np.ones((3, 2, 3, 3), np.float32)
save("ct_group2", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=2, name="ct")], {"w": ct_w}, None)
c3 = np.ones(3, np.float32)
def save_in(name, nodes, inits, xshape):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/{name}.onnx")
save_in("bn_0d", [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")], {"s": c3, "b": c3, "m": c3, "v": c3}, [])
sq, zq = np.array(0.05, np.float32), np.array(128, np.uint8)
save_in("batch0", [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], name="bn"),
                   helper.make_node("QuantizeLinear", ["n", "sq", "zq"], ["q"]), helper.make_node("DequantizeLinear", ["q", "sq", "zq"], ["dq"]),
                   helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
                   helper.make_node("Conv", ["dq", "wd"], ["c"], name="qconv", pads=[1, 1, 1, 1]),
                   helper.make_node("QuantizeLinear", ["c", "sq", "zq"], ["q2"]), helper.make_node("DequantizeLinear", ["q2", "sq", "zq"], ["c2"]),
                   helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="gap"), helper.make_node("Flatten", ["g"], ["f"]),
                   helper.make_node("Gemm", ["f", "gw"], ["y"], transB=1, name="gemm_no_c")],
        {"s": c3, "b": c3, "m": c3, "v": c3, "sq": sq, "zq": zq, "ws": np.array(0.01, np.float32), "wz": np.array(0, np.int8),
         "wq": np.ones((3, 3, 3, 3), np.int8), "gw": np.ones((2, 3), np.float32)}, ["N", 3, 4, 5])
np.save(f"{d}/x0.npy", np.zeros((0, 3, 4, 5), np.float32))
np.save(f"{d}/s0.npy", np.array(1.0, np.float32))
x = np.random.default_rng(0).normal(0, 4, (2, 3, 4, 5)).astype(np.float32)
x.flat[:4] = [1e30, -1e30, np.inf, -np.inf]
np.save(f"{d}/x4.npy", x)
# .npy files whose headers lie.
def npy(name, header, payload=b""):
    h = header.encode("latin1"); h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    open(f"{d}/{name}", "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + payload)
npy("huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000000000), }", b"\0" * 64)
npy("badshape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (a, b), }", b"\0" * 64)
npy("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 5), }", b"\0" * 64)
open(f"{d}/text.npy", "w").write("not numpy\n")
PY
check "ONNX: Transpose naming an axis twice names the node" 6 "Transpose 'tr': perm names axis 1 twice" -- \
  "$QFX" run "$tmp/perm_twice.onnx" -i "$tmp/x4.npy"
check "ONNX: Unsqueeze naming an axis twice names the node" 6 "Unsqueeze 'us': axes name 0 twice" -- \
  "$QFX" run "$tmp/unsqueeze_twice.onnx" -i "$tmp/x4.npy"
check "ONNX: Pad beyond 2^40 names the node" 6 "Pad 'pad': pads beyond 2\\^40" -- \
  "$QFX" run "$tmp/pad_huge.onnx" -i "$tmp/x4.npy"
check "ONNX: ReduceMean of an empty tensor runs" 0 "y: \\[2, 0, 1, 1\\] float32" -- \
  "$QFX" run "$tmp/reducemean_empty.onnx" -i "$tmp/x4.npy"
check "ONNX: MatMul of a scalar names the node" 6 "MatMul 'mm': MatMul of a scalar" -- \
  "$QFX" run "$tmp/matmul_scalar.onnx" -i "$tmp/x4.npy"
check "ONNX: a pooling stride of 2^33 names the node" 6 "MaxPool 'mp': .*must be below 2\\^31" -- \
  "$QFX" run "$tmp/pool_huge_stride.onnx" -i "$tmp/x4.npy"
check "ONNX: an int8 MatMul with an empty weight names the node" 6 "QLinearMatMul 'mm': empty weight \\[5, 0\\]" -- \
  "$QFX" run "$tmp/qmatmul_empty_weight.onnx" -i "$tmp/x4.npy"
check "ONNX: two nodes writing one value are refused at load" 6 "node 'r2' \(Neg\) writes 't', which node 'r1' already defines" -- \
  "$QFX" run "$tmp/double_write.onnx" -i "$tmp/x4.npy"
check "ONNX: a node writing over a graph input is refused at load" 6 "node 'rx' \(Relu\) writes 'x', which a graph input already defines" -- \
  "$QFX" run "$tmp/writes_input.onnx" -i "$tmp/x4.npy"
check "ONNX: a node writing over an initializer is refused at load" 6 "node 'rw' \(Relu\) writes 'w', which an initializer already defines" -- \
  "$QFX" run "$tmp/writes_initializer.onnx" -i "$tmp/x4.npy"
check "ONNX: a node reading an undefined value is refused at load" 6 "node 'add' \(Add\) reads 'nowhere', which no graph input" -- \
  "$QFX" run "$tmp/reads_undefined.onnx" -i "$tmp/x4.npy"
check "ONNX: a ConvTranspose group that does not divide the channels names the node" 6 "ConvTranspose 'ct': group 2 must be positive and divide the input channels 3" -- \
  "$QFX" run "$tmp/ct_group2.onnx" -i "$tmp/x4.npy"
check "ONNX: BatchNormalization of a 0-d input names the node" 6 "BatchNormalization 'bn': needs an \[N, C, ...\] input, got \[\]" -- \
  "$QFX" run "$tmp/bn_0d.onnx" -i "$tmp/s0.npy"
for be in reference onednn; do
  check "ONNX: a batch of 0 through BatchNormalization, int8 Conv, GlobalAveragePool and Gemm without C ($be): an empty output" 0 \
    "y: \[0, 2\] float32" -- "$QFX" run "$tmp/batch0.onnx" -i "$tmp/x0.npy" --backend $be
done
check "ONNX: Transpose with negative perm runs" 0 "y: \[2, 5, 3, 4\] float32" -- \
  "$QFX" run "$tmp/perm_negative.onnx" -i "$tmp/x4.npy"
check "ONNX: Clip without max on a QDQ model: int8, reference == onednn, saturates to qmax" 0 "^equal 255$" -- bash -c \
  "'$QFX' run '$tmp/clip_no_max.onnx' -i '$tmp/x4.npy' -o '$tmp/c_ref.npy' --backend reference >/dev/null &&
   '$QFX' run '$tmp/clip_no_max.onnx' -i '$tmp/x4.npy' -o '$tmp/c_dnn.npy' --backend onednn >/dev/null &&
   $PY -c \"
import numpy as np; a, b = np.load('$tmp/c_ref.npy'), np.load('$tmp/c_dnn.npy')
print('equal', int(round(a.flat[0] / 0.05 + 128))) if (a == b).all() and a.flat[2] == a.flat[0] else print('differ', a.flat[:4], b.flat[:4])\""
check "npy: a header claiming 10^22 elements is a file error" 7 "huge.npy: truncated data: the header's shape needs more" -- \
  "$QFX" run "$tmp/perm_negative.onnx" -i "$tmp/huge.npy"
check "npy: a bad shape string is a file error" 7 "badshape.npy: bad shape '\(a, b\)'" -- \
  "$QFX" run "$tmp/perm_negative.onnx" -i "$tmp/badshape.npy"
check "npy: data shorter than the header says" 7 "short.npy: truncated data" -- \
  "$QFX" run "$tmp/perm_negative.onnx" -i "$tmp/short.npy"
check "npy: not a .npy file" 7 "text.npy: not a .npy file" -- \
  "$QFX" run "$tmp/perm_negative.onnx" -i "$tmp/text.npy"
check "qfx run: missing input file" 7 "none.npy: cannot open" -- \
  "$QFX" run "$tmp/perm_negative.onnx" -i "$tmp/none.npy"
# A model with two outputs: evaluation.output picks the one evaluated.
cat > "$tmp/two_out.py" <<'PY'
import sys, torch, torch.nn as nn
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.a, self.b = nn.Linear(8, 10), nn.Linear(8, 4)
    def forward(self, x):
        f = self.body(x)
        return self.a(f), self.b(f)
torch.jit.save(torch.jit.script(TwoHeads().eval()), sys.argv[1])
PY
$PY "$tmp/two_out.py" "$tmp/two_out.pt"
check "qfx ptq: a model with two outputs evaluates evaluation.output, and reports each" 0 "output 'output_1': cosine" -- \
  "$QFX" ptq --set model.path="$tmp/two_out.pt" --set calibration.num_samples=32 --set evaluation.num_samples=64 \
  --set evaluation.metric=cosine --set evaluation.output=1 --set evaluation.sqnr_samples=0 --set output.dir="$tmp/two_out"
check "report.json: per-output cosine and SQNR; the evaluated output's equal the headline" 0 "^ok" -- $PY -c "
import json
e = json.load(open('$tmp/two_out/report.json'))['evaluation']
o = {x['name']: x for x in e['outputs']}
ok = sorted(o) == ['output_0', 'output_1'] and o['output_1']['cosine_int8_vs_fp32'] == e['cosine_int8_vs_fp32'] \
     and o['output_1']['sqnr_db_int8_vs_fp32'] == e['sqnr_db_int8_vs_fp32'] and 0.9 < o['output_0']['cosine_int8_vs_fp32'] <= 1
print('ok' if ok else 'differ', e['outputs'], e['cosine_int8_vs_fp32'])"
check "qfx ptq: evaluation.output beyond the model's outputs" 3 "evaluation.output 2: the model has 2 output\(s\)" -- \
  "$QFX" ptq --set model.path="$tmp/two_out.pt" --set calibration.num_samples=16 --set evaluation.num_samples=16 \
  --set evaluation.metric=cosine --set evaluation.output=2 --set output.dir="$tmp/two_out2"
check "qfx ptq: --set without '='" 3 "expected KEY=VALUE" -- "$QFX" ptq --set calibration.num_samples
check "qfx ptq: negative batch size" 3 "calibration.batch_size must be >= 1" -- "$QFX" ptq --set calibration.batch_size=-4
check "qfx ptq: unknown observer lists the known ones" 3 "bad qconfig.global.activation.observer 'maxmin' \\(expected one of: minmax" -- "$QFX" ptq --set qconfig.global.activation.observer=maxmin
check "qfx ptq: config is not a mapping" 3 "must be a YAML mapping" -- bash -c "echo '- a' > '$tmp/list.yaml'; '$QFX' ptq '$tmp/list.yaml'"
check "qfx ptq: YAML syntax error names file and line" 3 "broken.yaml:[0-9]+:[0-9]+: YAML syntax error" -- \
  bash -c "printf 'model:\n  path: [unclosed\n' > '$tmp/broken.yaml'; '$QFX' ptq '$tmp/broken.yaml'"
printf 'import sys, json\nopen(sys.argv[0] + ".args", "w").write(json.dumps(sys.argv[1:]))\nprint("{}")\n' > "$tmp/args.py"
check "qfx bench: --arch reaches the PyTorch script as one argument, never a shell" 0 "^one argument, no shell$" -- bash -c \
  "'$QFX' bench '$FIXTURES/resnet18_scripted.pt' '$FIXTURES/onnx/resnet18.onnx' --int8 '$FIXTURES/onnx/resnet18.onnx' \
     --pytorch-int8 '$tmp/args.py' --arch 'x; touch $tmp/pwned' --batch 1 --iters 1 --size 64 >/dev/null 2>&1;
   [ -e '$tmp/pwned' ] && echo shell; $PY -c \"
import json; a = json.load(open('$tmp/args.py.args')); i = a.index('--arch')
print('one argument, no shell' if a[i + 1] == 'x; touch $tmp/pwned' else a)\""
check "qfx ptq writes model_fp32.onnx; qfx bench OUTPUT_DIR times it beside the int8 model at the model's own input size" 0 \
  "^ok$" -- bash -c \
  "'$QFX' ptq --set calibration.num_samples=64 --set evaluation=null --set output.dir='$tmp/fm' \
     >/dev/null 2>&1 && [ -s '$tmp/fm/model_fp32.onnx' ] && grep -q model_fp32.onnx '$tmp/fm/report.json' &&
   '$QFX' bench '$tmp/fm' --batch 2 --iters 1 >'$tmp/fm.bench' 2>'$tmp/fm.err' &&
   grep -q 'input \[N, 1, 28, 28\]' '$tmp/fm.bench' && grep -q 'qfx int8' '$tmp/fm.bench' &&
   ! grep -qi 'warn' '$tmp/fm.err' -e 'TorchScript' && echo ok || cat '$tmp/fm.bench' '$tmp/fm.err'"
check "qfx bench OUTPUT_DIR taps the values its calibration observed (report.json's observed_tensors)" 0 "^ok$" -- bash -c \
  "n=\$(python3 -c \"import json; print(json.load(open('$tmp/fm/report.json'))['calibration']['observed_tensors'])\") &&
   grep -q \"^# taps: \$n values calibration observed\" '$tmp/fm.bench' && echo ok || { echo \"observed \$n\"; grep taps: '$tmp/fm.bench'; }"
check "qfx bench --peak: the memory read bandwidth, and the time reading the tapped values takes at it" 0 \
  "^# the taps read [0-9.]+ M float values \([0-9.]+ MB\) per image; reading them from memory at [0-9.]+ GB/s alone takes [0-9.]+ ms per image$" -- \
  bash -c "'$QFX' bench '$tmp/fm' --batch 2 --iters 1 --peak | tee '$tmp/fm.peak' && grep -qE '^# peak of this machine.*; memory read [0-9.]+ GB/s$' '$tmp/fm.peak'"
check "qfx bench OUTPUT_DIR whose encodings.json is not JSON" 7 "encodings.json: not valid JSON" -- bash -c \
  "cp -r '$tmp/fm' '$tmp/fm_bad' && echo '{oops' >'$tmp/fm_bad/encodings.json' && '$QFX' bench '$tmp/fm_bad' --batch 2 --iters 1"
rm -rf "$tmp/fm_bad"  # its broken encodings.json was this check's input, not something qfx wrote
check "qfx bench MODEL.pt alone: the fp32 ONNX is built in-process at the first conv's channels" 0 "input \[N, 1, 28, 28\]" -- \
  "$QFX" bench "$FIXTURES/fashion_resnet.pt" --size 28 --batch 2 --iters 1
check "qfx ptq output.float_model=false: no model_fp32.onnx" 0 "^ok$" -- bash -c \
  "'$QFX' ptq --set calibration.num_samples=64 --set evaluation=null --set output.float_model=false --set output.dir='$tmp/nofm' \
     >/dev/null 2>&1 && [ ! -e '$tmp/nofm/model_fp32.onnx' ] && echo ok"
printf 'import sys\nsys.stderr.write("Traceback (most recent call last):\\nRuntimeError: the head does not fit\\n")\nsys.exit(1)\n' > "$tmp/fails.py"
check "qfx bench: a PyTorch column that could not be measured says why" 0 "# no PyTorch fx at batch 2: RuntimeError: the head does not fit" -- \
  "$QFX" bench "$tmp/fm" --batch 2 --iters 1 --pytorch-int8 "$tmp/fails.py"
# The PyTorch comparison rebuilds the torchvision architecture with the model's own head.
$PY -c "import torch, torchvision; torch.jit.script(torchvision.models.resnet18(num_classes=10).eval()).save('$tmp/r18_10.pt')" 2>/dev/null
check "PyTorch comparison script: a torchvision model with a 10-class head is timed" 0 '"int8_ms_per_batch"' -- \
  $PY "$(dirname "$0")/../../tools/bench/pytorch_calibration.py" "$tmp/r18_10.pt" --arch resnet18 --batch 1 --images 0 --res 32 --threads 1
check "PyTorch comparison script: a model that is not the architecture says so" 1 "is not a torchvision mobilenet_v2" -- \
  $PY "$(dirname "$0")/../../tools/bench/pytorch_calibration.py" "$tmp/r18_10.pt" --arch mobilenet_v2 --batch 1 --images 0 --res 32
check "qfx bench: a folder without report.json is an error naming it" 7 "nofolder/report.json: not found" -- \
  bash -c "mkdir -p '$tmp/nofolder' && '$QFX' bench '$tmp/nofolder'"
# A busy machine: with two CPU-bound processes beside it, qfx runs itself again with
# OpenMP's passive wait policy and says so; a policy the user set stands.
busy_pids=""
for i in 1 2; do (while :; do :; done) & busy_pids="$busy_pids $!"; done
check "busy machine: qfx switches OpenMP to the passive wait policy and says so" 0 \
  "other processes keep [0-9.]+ of [0-9]+ CPUs busy: OpenMP threads wait passively" -- \
  env -u OMP_WAIT_POLICY -u QFX_BUSY_CHECK "$QFX" run "$tmp/perm_negative.onnx" -i "$tmp/x4.npy"
check "busy machine: OMP_WAIT_POLICY set by the user stands (no note)" 0 "^ok$" -- bash -c \
  "OMP_WAIT_POLICY=active QFX_BUSY_CHECK= '$QFX' run '$tmp/perm_negative.onnx' -i '$tmp/x4.npy' 2>&1 | grep -q 'wait passively' || echo ok"
kill $busy_pids 2>/dev/null; wait $busy_pids 2>/dev/null
# Values that would make a model look calibrated, or every input 0 or NaN, are refused
# before any work: non-finite numbers anywhere in a config, empty calibration data.
$PY -c "import numpy; numpy.save('$tmp/empty.npy', numpy.zeros((0, 1, 28, 28), numpy.float32))"
check "qfx ptq: a non-finite number in a config (std: .inf) names the key" 3 "calibration.data.std must be a finite number, not .inf" -- \
  "$QFX" ptq --set "calibration.data={format: npy, images: $tmp/rnd.npy, std: .inf}" --set output.dir="$tmp/inf_std"
check "qfx ptq: .nan names the key" 3 "calibration.data.mean must be a finite number, not .nan" -- \
  "$QFX" ptq --set "calibration.data={format: npy, images: $tmp/rnd.npy, mean: .nan}" --set output.dir="$tmp/nan_mean"
check "qfx ptq: calibration data without samples is an error, not scale 1" 6 "calibration saw no samples" -- \
  "$QFX" ptq --set "calibration.data={format: npy, images: $tmp/empty.npy}" --set evaluation=null --set output.dir="$tmp/no_samples"
check "qfx bench --batch 0 / --iters 0 are refused by the argument parser" 0 "^ok$" -- bash -c \
  "'$QFX' bench --peak --batch 0 2>&1 | grep -q 'not in range' && '$QFX' bench --peak --iters 0 2>&1 | grep -q 'not in range' && echo ok"
check "qfx ptq: num_samples beyond the data is reported, not silently clamped; with stdout and stderr in one pipe the header comes first" 0 \
  "^ok$" -- bash -c \
  "QFX_BUSY_CHECK=0 '$QFX' ptq --set 'calibration.data={format: npy, images: $tmp/rnd.npy}' --set calibration.num_samples=1000 \
     --set evaluation=null --set output.dir='$tmp/clamped' > '$tmp/order.txt' 2>&1
   sed -n 1p '$tmp/order.txt' | grep -q '^qfx ptq: ' &&
   sed -n 2p '$tmp/order.txt' | grep -q '^calibration.num_samples is 1000, the data holds 16: using 16$' &&
   sed -n 3p '$tmp/order.txt' | grep -q '^calibration: 16/16' && echo ok || cat '$tmp/order.txt'"
# Degenerate outputs: a float model whose output is zero for every sample (a warning, and
# cosine 1 rather than 0 or NaN), and one whose outputs are near 1e31 (float32 sums of
# squares overflow: the metrics are computed in double and stay finite).
cat > "$tmp/degenerate.py" <<'PY'
import sys, torch, torch.nn as nn
class Head(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(1, 4, 3, padding=1), nn.Linear(4 * 28 * 28, 10)
        with torch.no_grad():
            self.fc.weight.mul_(scale); self.fc.bias.mul_(scale)
    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))
torch.manual_seed(0)
torch.jit.save(torch.jit.script(Head(0.0).eval()), sys.argv[1] + "/dead.pt")
torch.jit.save(torch.jit.script(Head(1e29).eval()), sys.argv[1] + "/huge.pt")
PY
$PY "$tmp/degenerate.py" "$tmp"
check "qfx ptq: a float model with one output for every sample is named; cosine 1, not 0 or NaN" 0 "^ok$" -- bash -c \
  "'$QFX' ptq --set model.path='$tmp/dead.pt' --set calibration.num_samples=32 --set evaluation.num_samples=64 \
     --set evaluation.metric=cosine --set evaluation.sqnr_samples=0 --set output.dir='$tmp/dead' > '$tmp/dead.log' 2>&1 &&
   grep -q \"warning: the float model's output is the same for every evaluated sample\" '$tmp/dead.log' &&
   $PY -c \"import json; e = json.load(open('$tmp/dead/report.json'))['evaluation']; print('ok' if e['fp32_output_constant'] and e['cosine_int8_vs_fp32'] == 1.0 else e)\""
check "qfx ptq: outputs near 1e31 give finite metrics (computed in double)" 0 "^ok$" -- bash -c \
  "'$QFX' ptq --set model.path='$tmp/huge.pt' --set calibration.num_samples=32 --set evaluation.num_samples=64 \
     --set evaluation.metric=cosine --set evaluation.sqnr_samples=0 --set output.dir='$tmp/huge' >/dev/null 2>&1 &&
   $PY -c \"import json, math; e = json.load(open('$tmp/huge/report.json'))['evaluation']; c, s = e['cosine_int8_vs_fp32'], e['sqnr_db_int8_vs_fp32']
print('ok' if isinstance(c, float) and isinstance(s, float) and math.isfinite(c) and math.isfinite(s) and c > 0.9 else e)\""
# SIGTERM in the middle of a run: the staging folder and the output folder the run
# created are removed, and the process dies of the signal (143); killing the --nproc
# launcher stops its ranks too (none left running), with the same cleanup.
mkdir -p "$tmp/sig1" "$tmp/sig2"
for spec in "sig1:1" "sig2:2"; do
  d=$tmp/${spec%%:*}; np=${spec#*:}
  check "SIGTERM during qfx ptq --nproc $np: nothing half-written is left, no rank keeps running" 0 "^clean 143 0$" -- bash -c "
    '$QFX' ptq --nproc $np --set calibration.num_samples=2048 --set evaluation.num_samples=10000 --set output.dir='$d/out' >/dev/null 2>&1 &
    pid=\$!
    for i in \$(seq 1 300); do ls -A '$d' | grep -q qfx-staging && break; sleep 0.1; done
    sleep 0.5; kids=\$(pgrep -P \$pid); kill -TERM \$pid; wait \$pid; rc=\$?
    sleep 0.5; ranks=0; for k in \$kids; do kill -0 \$k 2>/dev/null && ranks=\$((ranks + 1)); done
    [ -z \"\$(ls -A '$d')\" ] && echo clean \$rc \$ranks || echo left \$(ls -A '$d') \$rc \$ranks"
done
check "qfx bench: no models and no --peak" 3 "qfx bench needs a model: a qfx ptq / qat output folder, or a TorchScript file" -- \
  "$QFX" bench
# Determinism: two identical runs write byte-identical models and encodings.
check "qfx ptq: two identical runs give byte-identical model_int8.onnx and encodings.json" 0 "^identical$" -- bash -c \
  "for r in 1 2; do '$QFX' ptq --set calibration.num_samples=64 --set evaluation=null --set output.dir='$tmp/det'\$r \
     >/dev/null 2>&1 || exit 1; done
   cmp -s '$tmp/det1/model_int8.onnx' '$tmp/det2/model_int8.onnx' && cmp -s '$tmp/det1/encodings.json' '$tmp/det2/encodings.json' \
     && echo identical || echo differ"
# A failure after every file was staged (fault injection) changes nothing in the
# output folder: the previous run's files and the user's own file stay as they were.
check "qfx ptq: a failure at commit leaves the previous output untouched" 0 "^untouched$" -- bash -c \
  "echo mine > '$tmp/det1/notes.txt'; before=\$(cd '$tmp/det1' && ls -A | sort | xargs md5sum);
   QFX_FAULT_BEFORE_COMMIT=1 '$QFX_FAULTS' ptq --set calibration.num_samples=32 --set calibration.seed=5 --set evaluation=null \
     --set output.dir='$tmp/det1' >/dev/null 2>&1; rc=\$?
   after=\$(cd '$tmp/det1' && ls -A | sort | xargs md5sum)
   [ \$rc -eq 7 ] && [ \"\$before\" = \"\$after\" ] && ! ls -A '$tmp' | grep -q qfx-staging && echo untouched || echo \"rc \$rc changed\""
check "qfx ptq: a new run replaces its files and keeps the user's" 0 "^kept$" -- bash -c \
  "'$QFX' ptq --set calibration.num_samples=32 --set calibration.seed=5 --set evaluation=null --set output.dir='$tmp/det1' \
     >/dev/null 2>&1 && grep -q mine '$tmp/det1/notes.txt' && ! cmp -s '$tmp/det1/encodings.json' '$tmp/det2/encodings.json' \
     && ! ls -A '$tmp' | grep -q qfx-staging && echo kept"
check "no arguments" 106 "model is required|required" -- "$QFX" inspect
check "an unknown command is named, with the commands" 106 "unknown command 'frobnicate' \(commands: inspect, run, bench, ptq, qat, ops, report" -- \
  "$QFX" frobnicate
check "calibration.device other than cpu or cuda names the override" 3 "--set 'calibration.device=gpu': calibration.device must be cpu or cuda, got 'gpu'" -- \
  "$QFX" ptq --set calibration.device=gpu --set evaluation=null --set output.dir="$tmp/dev_gpu"
# Where no NVIDIA driver is installed (CI's machines), calibration on the GPU is refused at
# load with the reason; on a machine with one the same config calibrates on the GPU.
if ! ldconfig -p | grep -q 'libcuda\.so\.1'; then
  check "calibration.device: cuda without a GPU says why, before any work" 3 "calibration.device: cuda, but no NVIDIA driver" -- \
    "$QFX" ptq --set calibration.device=cuda --set evaluation=null --set output.dir="$tmp/dev_cuda"
fi

check_encodings "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
