#!/usr/bin/env bash
# Hugging Face transformers models (BERT, GPT-2, Llama, ViT; small configs, random
# weights) as torch.export programs with a dynamic batch, built by tests/cli/hf_models.py
# (BERT and ViT also after run_decompositions(): the Core ATen IR; and timm's
# MobileNetV3, whose BatchNormAct2d calls F.batch_norm: every conv int8, every batch
# norm folded),
# through qfx ptq from a config whose model.inputs list the inputs in reverse order
# (bound by name). Each: the reference backend equal to onednn, int8 cosine >= 0.99
# against fp32, qfx's fp32 model equal to PyTorch's output (1e-4), every projection an
# int8 QGemm / QLinearMatMul, and ONNX Runtime running the int8 model to qfx's outputs.
# Needs $QFX; $1 = tools/ort_check.
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"
ort=$1
models=(bert gpt2:eager llama vit bert:sdpa:core vit:sdpa:core timm-mobilenetv3_small_050)
check "transformers models export (torch.export, dynamic batch)" 0 "^ok vit_sdpa" -- \
  $PY "$(dirname "$0")/hf_models.py" "$tmp" "${models[@]}"
for spec in "${models[@]}"; do
  name=${spec%%:*}; rest=${spec#"$name"}; rest=${rest#:}; attn=${rest%%:*}; core=${rest#"$attn"}
  tag=${name}_${attn:-sdpa}${core:+_core}
  check "qfx ptq $tag" 0 "reference backend: 8 of 8 int8 outputs identical" -- "$QFX" ptq "$tmp/$tag.yaml"
  check "$tag: int8 cosine >= 0.99; fp32 model equals PyTorch; every projection (conv) int8" 0 "^ok" -- $PY -c "
import json, numpy as np
r = json.load(open('$tmp/$tag/report.json')); c = r['evaluation']['cosine_int8_vs_fp32']
ops = [k['op'] for k in r['kernels']]
cnn = '$tag'.startswith('timm-')  # every conv int8 with its batch norm folded (timm calls F.batch_norm)
q = sum(o in (('QLinearConv',) if cnn else ('QGemm', 'QLinearMatMul', 'MatMulIntegerToFloat')) for o in ops)
fl = sum(o in (('Conv', 'BatchNormalization') if cnn else ('Gemm', 'MatMul')) for o in ops)
print('ok' if c >= 0.99 and q >= 8 and fl == 0 else 'low', c, q, fl)"
  inputs=()
  for name in $($PY -c "import onnx; print(' '.join(i.name for i in onnx.load('$tmp/$tag/model_int8.onnx', load_external_data=False).graph.input))"); do
    inputs+=("$tmp/$tag.$name.npy")
  done
  check "$tag: qfx's fp32 model equals PyTorch; ONNX Runtime runs the int8 model to qfx's outputs (cosine >= 0.999)" 0 "^ok" -- bash -c "
    '$QFX' run '$tmp/$tag/model_fp32.onnx' $(printf -- "--input '%s' " "${inputs[@]}") --output '$tmp/$tag.f.npy' >/dev/null &&
    '$QFX' run '$tmp/$tag/model_int8.onnx' $(printf -- "--input '%s' " "${inputs[@]}") --output '$tmp/$tag.q.npy' >/dev/null &&
    ORT_OPT=disabled $PY '$ort/run.py' '$tmp/$tag/model_int8.onnx' '$tmp/$tag.ort.npy' ${inputs[*]} 2>/dev/null && $PY -c \"
import glob, numpy as np
first = lambda s: np.load(sorted(glob.glob('$tmp/$tag.' + s + '*.npy'))[0])
f, q, o, ref = first('f'), first('q'), np.load('$tmp/$tag.ort.npy'), np.load('$tmp/$tag.fp32.npy')
cos = lambda a, b: float((a * b).sum() / np.linalg.norm(a) / np.linalg.norm(b))
ok = np.abs(f - ref).max() <= 1e-4 * np.abs(ref).max() and cos(o, q) >= 0.999
print('ok' if ok else 'differ', float(np.abs(f - ref).max()), cos(o, q))\""
done
check "model.inputs naming no input of the program: exit 3 naming its inputs" 3 \
  "model.inputs.token_ids: .*bert_sdpa.pt2 has no input of that name \(its inputs: input_ids, attention_mask\)" -- \
  bash -c "sed 's/    input_ids:/    token_ids:/' '$tmp/bert_sdpa.yaml' > '$tmp/bad.yaml' && '$QFX' ptq '$tmp/bad.yaml'"
echo "hf tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
