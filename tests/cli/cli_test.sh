#!/usr/bin/env bash
# The qfx CLI as a user runs it: the wrap fixture shows one call_method node, and
# each bad input gives one clear line and its own exit code (never a crash).
# Needs: $QFX (the binary), $FIXTURES (exported fixtures).
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check() {  # name expected_rc pattern -- command...
  local name=$1 want=$2 pattern=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; echo "$out" | head -5; fail=$((fail+1)); return
  fi
  if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | head -5; fail=$((fail+1)); return
  fi
  if grep -qE "terminate called|Segmentation|Exception raised from|frame #" <<<"$out"; then
    echo "FAIL $name: crash or stack dump in output"; fail=$((fail+1)); return
  fi
  echo "ok   $name"; pass=$((pass+1))
}

check "wrap fixture: _post_process is one call_method" 0 "call_method +_post_process +_post_process" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt"
check "code view" 0 "_post_process = self._post_process\(relu\)" -- "$QFX" inspect "$FIXTURES/wrap_example.pt"
check "unwrapped, train mode: softmax only" 0 "aten::softmax" -- \
  "$QFX" inspect "$FIXTURES/wrap_example_unwrapped.pt" --train
check "--wrap from the command line" 0 "call_module +head +head" -- \
  "$QFX" inspect "$FIXTURES/custom_module.pt" --wrap module_type:DecodeHead
printf 'tracer:\n  wrap: ["function:topk_decode"]\n' > "$tmp/ok.yaml"
check "--config tracer.wrap" 0 "call_function +topk_decode +topk_decode" -- \
  "$QFX" inspect "$FIXTURES/function_call.pt" --config "$tmp/ok.yaml"

check "shipped example config" 0 "call_module +head +head" -- \
  "$QFX" inspect "$FIXTURES/custom_module.pt" --config "$(dirname "$0")/../../configs/examples/tracer_wrap.yaml"

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
check "unknown backend lists the shipped ones" 3 "unknown backend 'tpu' \\(available: example_accel, onednn, reference" -- \
  "$QFX" inspect "$FIXTURES/wrap_example.pt" --backend tpu
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
  "$QFX" ptq --set calibration.num_samples=128 --set evaluation.num_samples=500 --set output.dir="$tmp/ptq"
check "qfx ptq: artifacts written" 0 "graph_hash" -- cat "$tmp/ptq/encodings.json"
/usr/bin/python3 -c "import numpy; numpy.save('$tmp/img.npy', numpy.zeros((1, 1, 28, 28), numpy.float32))"
check "qfx ptq: model runs on the runtime" 0 "output: \\[1, 10\\]" -- \
  "$QFX" run "$tmp/ptq/model_int8.onnx" -i "$tmp/img.npy"
check "qfx ptq: unknown config key" 3 "unknown key 'calibraton'" -- \
  "$QFX" ptq --set calibraton.num_samples=1
check "qfx ptq: --set reaches the qconfig section" 3 "qconfig.global.weight.bits must be between 2 and 8" -- \
  "$QFX" ptq --set qconfig.global.weight.bits=9
check "no arguments" 106 "model is required|required" -- "$QFX" inspect

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
