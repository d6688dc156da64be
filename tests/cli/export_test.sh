#!/usr/bin/env bash
# torch.export programs (.pt2) through the command line: the same model through the
# TorchScript frontend and the export frontend gives a byte-identical int8 model
# (PTQ and QAT); inspect reads programs; bad archives are clear errors with their
# exit codes. Needs $QFX, $FIXTURES (export_programs.py and train_fashion_mnist.py
# write the .pt2 files with torch 2.x).
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"

same_int8() {  # NAME DIR_A DIR_B: model_int8.onnx equal, encodings equal but for the graph hash
  check "$1" 0 "^same$" -- bash -c \
    "cmp -s '$2/model_int8.onnx' '$3/model_int8.onnx' && $PY -c \"
import json
a, b = (json.load(open(d + '/encodings.json')) for d in ('$2', '$3'))
a.pop('graph_hash'); b.pop('graph_hash')
assert a == b
print('same')\""
}

# The same int8 model up to value names: the same ops in the same order, and the same
# initializers in order (the frontends name a tuple's element differently: TorchScript
# lstm_0, torch.export getitem).
same_int8_values() {  # NAME DIR_A DIR_B
  check "$1" 0 "^same$" -- $PY -c "
import onnx, numpy as np
from onnx import numpy_helper
a, b = (onnx.load(d + '/model_int8.onnx') for d in ('$2', '$3'))
ops = lambda m: [(n.op_type, [(x.name, x.i, x.f, x.s, tuple(x.ints)) for x in n.attribute]) for n in m.graph.node]
arrays = lambda m: [numpy_helper.to_array(i) for i in m.graph.initializer]
same = ops(a) == ops(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(arrays(a), arrays(b)))
print('same' if same and len(arrays(a)) == len(arrays(b)) else 'differs')"
}

quick=(--set calibration.num_samples=128 --set evaluation.num_samples=500 --set evaluation.reference_check=100
       --set evaluation.sqnr_samples=16)
for ext in pt pt2; do
  check "qfx ptq fashion_resnet.$ext" 0 "reference backend: 100 of 100 int8 outputs identical" -- \
    "$QFX" ptq --set model.path="$FIXTURES/fashion_resnet.$ext" "${quick[@]}" --set output.dir="$tmp/ptq_$ext"
done
same_int8 "PTQ: TorchScript and torch.export give the same int8 model" "$tmp/ptq_pt" "$tmp/ptq_pt2"

qat=(--set training.num_samples=1280 --set training.max_steps=20 --set calibration.num_samples=128
     --set evaluation.num_samples=500 --set evaluation.reference_check=100)
for ext in pt pt2; do
  check "qfx qat fashion_mobilenet.$ext (20 steps)" 0 "int8 \\(runtime\\)" -- \
    "$QFX" qat --set model.path="$FIXTURES/fashion_mobilenet.$ext" "${qat[@]}" --set output.dir="$tmp/qat_$ext"
done
same_int8 "QAT: TorchScript and torch.export train to the same int8 model" "$tmp/qat_pt" "$tmp/qat_pt2"

# qfx ptq on FIXTURE.pt and FIXTURE.pt2 with DATA.npy as calibration and evaluation data
# (each run's output must match PATTERN; extra arguments are --set overrides), then the
# two int8 models compared.
both_frontends() {  # WHAT FIXTURE INPUT_SHAPE DATA PATTERN [ARGS...]
  local what=$1 fixture=$2 shape=$3 data=$4 pattern=$5; shift 5
  for ext in pt pt2; do
    check "qfx ptq $fixture.$ext" 0 "$pattern" -- \
      "$QFX" ptq --set model.path="$FIXTURES/$fixture.$ext" --set "model.input_shape=$shape" \
      --set "calibration.data={format: npy, images: $tmp/$data.npy}" --set "evaluation.data={format: npy, images: $tmp/$data.npy}" \
      "$@" --set output.dir="$tmp/${fixture}_$ext"
  done
  ${SAME:-same_int8} "$what: TorchScript and torch.export give the same int8 model" "$tmp/${fixture}_pt" "$tmp/${fixture}_pt2"
}
# qfx and ONNX Runtime both run DIR's int8 model on DATA.npy; the Python JUDGE then
# decides with r (DIR's report.json), y (ONNX Runtime's output) and q (qfx's), and prints
# ok or bad with its evidence.
int8_vs_ort() {  # WHAT DIR DATA JUDGE
  local what=$1 dir=$2 data=$3 judge=$4
  check "$what" 0 "^ok" -- bash -c "'$QFX' run '$dir/model_int8.onnx' -i '$tmp/$data.npy' -o '$dir/qfx_output.npy' >/dev/null &&
    $PY -c \"
import json, numpy as np, onnxruntime as ort
r = json.load(open('$dir/report.json'))
s = ort.InferenceSession('$dir/model_int8.onnx', providers=['CPUExecutionProvider'])
x = np.load('$tmp/$data.npy'); y = s.run(None, {s.get_inputs()[0].name: x})[0]; q = np.load('$dir/qfx_output.npy')
$judge\""
}
npy() {  # NAME SEED SHAPE
  $PY -c "import numpy; numpy.save('$tmp/$1.npy', numpy.random.default_rng($2).normal(0, 1, $3).astype(numpy.float32))"
}

# A 1-D model (Conv1d, BatchNorm1d, 1-D pooling).
npy audio 4 "(32, 40, 100)"
both_frontends "1-D" kws_1d "[-1, 40, 100]" audio "reference backend: 32 of 32 int8 outputs identical" \
  --set evaluation.metric=cosine --set evaluation.reference_check=-1
# Recurrent layers: a two-layer bidirectional LSTM / GRU (batch first) between a Conv1d and
# a linear head. The runtime's LSTM / GRU (ONNX semantics) against PyTorch's own on the
# first batch, int8 against fp32, and ONNX Runtime on the exported int8 model.
npy seq 6 "(32, 8, 20)"
for cell in lstm gru; do
  SAME=same_int8_values both_frontends "$cell" ${cell}_net "[-1, 8, 20]" seq "fp32 on the runtime vs libtorch \(first batch\): max relative error [0-9.]+e-0[6-9]" \
    --set evaluation.metric=cosine --set evaluation.sqnr_samples=0
  int8_vs_ort "$cell: int8 cosine >= 0.99; W and R stored as int8 codes per row (onednn: lstm/gru weighted); ONNX Runtime runs the int8 model within 1% of qfx" \
    "$tmp/${cell}_net_pt" seq "
ok = r['evaluation']['cosine_int8_vs_fp32'] >= 0.99 and any('$cell: recurrent layer: int8 weights' in f for f in r['float_fallbacks'])
ok = ok and np.abs(y - q).max() <= 0.01 * np.abs(q).max()
import onnx
g = onnx.load('$tmp/${cell}_net_pt/model_int8.onnx').graph
int8 = {i.name for i in g.initializer if i.data_type == onnx.TensorProto.INT8}
stacked = {n.input[0] for n in g.node if n.op_type == 'Unsqueeze'}  # one direction's W or R, stacked for the layer
rows = [n for n in g.node if n.op_type == 'DequantizeLinear' and n.input[0] in int8 and n.output[0] in stacked
        and any(a.name == 'axis' and a.i == 0 for a in n.attribute)]
ok = ok and len(rows) == 8  # W and R of 2 layers x 2 directions
print('ok' if ok else 'bad', r['evaluation']['cosine_int8_vs_fp32'], r['float_fallbacks'], np.abs(y - q).max(), len(rows))"
done
# GroupNorm and InstanceNorm2d.
npy x32 3 "(32, 3, 32, 32)"
both_frontends "GroupNorm / InstanceNorm" norm_net "[-1, 3, 32, 32]" x32 "output: cosine int8 vs fp32 0\\.9[89]" \
  --set evaluation.metric=cosine
# ELU (nn.ELU(alpha=0.5) and F.elu) and Mish, ops the op catalog adds with one record
# each: the fp32 model against libtorch, int8 as 256-entry tables on the codes (QLut,
# nothing float), ONNX Runtime on the int8 model equal to qfx, and a float ONNX file.
both_frontends "ELU / Mish" act_net "[-1, 3, 32, 32]" x32 "fp32 on the runtime vs libtorch \(first batch\): max relative error [0-9.]+e-0[6-9]" \
  --set evaluation.metric=cosine
int8_vs_ort "act_net: int8 cosine >= 0.999, both ELUs and the Mish QLut with no float fallback; ONNX Runtime equals qfx on the int8 model" \
  "$tmp/act_net_pt" x32 "
k = [(e['node'], e['op']) for e in r['kernels']]
luts = sum(op == 'QLut' for _, op in k)
ok = r['evaluation']['cosine_int8_vs_fp32'] >= 0.999 and luts == 3 and not r['float_fallbacks'] and np.array_equal(y, q)
print('ok' if ok else 'bad', r['evaluation']['cosine_int8_vs_fp32'], k, r['float_fallbacks'], np.abs(y - q).max())"
check "act_net: a float ONNX model (torch.onnx.export: Elu, and Mish as Mul(x, Tanh(Softplus(x)))) gives the same int8 model as the TorchScript file" 0 "^same$" -- \
  bash -c "$PY -c \"
import torch
m = torch.jit.load('$FIXTURES/act_net.pt').eval()
torch.onnx.export(m, (torch.randn(2, 3, 32, 32),), '$tmp/act_float.onnx', opset_version=17, dynamo=False, input_names=['x'],
                  dynamic_axes={'x': {0: 'N'}})\" 2>/dev/null &&
    '$QFX' ptq --set model.path='$tmp/act_float.onnx' --set 'model.input_shape=[-1, 3, 32, 32]' --set 'calibration.data={format: npy, images: $tmp/x32.npy}' \
      --set 'evaluation.data={format: npy, images: $tmp/x32.npy}' --set evaluation.metric=cosine --set output.dir='$tmp/act_onnx' >/dev/null &&
    $PY -c \"
import onnx
ops = lambda d: [n.op_type for n in onnx.load(d + '/model_int8.onnx').graph.node]
print('same' if ops('$tmp/act_onnx') == ops('$tmp/act_net_pt') and 'Elu' in ops('$tmp/act_onnx') and 'Softplus' in ops('$tmp/act_onnx') else 'differs')\""
check "cross-layer equalisation with no pair says why (ELU and Mish are not scale-equivariant)" 0 \
  "cross-layer equalisation: 0 layer pairs: .*not scale-equivariant.* the outputs of the 4 layers go to: aten::elu x2, aten::mish x1, output x1" -- \
  "$QFX" ptq --set model.path="$FIXTURES/act_net.pt2" --set "model.input_shape=[-1, 3, 32, 32]" \
  --set "calibration.data={format: npy, images: $tmp/x32.npy}" --set "evaluation.data={format: npy, images: $tmp/x32.npy}" \
  --set evaluation.metric=cosine --set ptq.cross_layer_equalization=true --set output.dir="$tmp/cle_none"
# A dictionary output (segmentation), selected by its key.
npy x64 5 "(16, 3, 64, 64)"
both_frontends "segmentation" lraspp_mobilenet_v3_large "[-1, 3, 64, 64]" x64 "segmentation: mean IoU" \
  --set evaluation.metric=miou --set evaluation.output=out --set evaluation.sqnr_samples=0
check "evaluation.output names a key the model lacks" 3 "evaluation.output 'aux': the model's dictionary has keys out" -- \
  "$QFX" ptq --set model.path="$FIXTURES/lraspp_mobilenet_v3_large.pt2" --set "model.input_shape=[-1, 3, 64, 64]" \
  --set "calibration.data={format: npy, images: $tmp/x64.npy}" --set "evaluation.data={format: npy, images: $tmp/x64.npy}" \
  --set evaluation.metric=miou --set evaluation.output=aux --set output.dir="$tmp/seg_bad"

check "qfx inspect reads a program" 0 "conv1: conv2d\\+batchnorm2d\\+relu -> ConvBnReLU2d" -- \
  "$QFX" inspect "$FIXTURES/dynamic_batch.pt2" --backend onednn
check "qfx inspect: a program is not a TorchScript trace" 0 "torch.export program, eval mode" -- \
  "$QFX" inspect "$FIXTURES/dynamic_batch.pt2"

bad() {  # FILE RC PATTERN
  check "qfx ptq on $1" "$2" "$3" -- "$QFX" ptq --set model.path="$FIXTURES/$1" --set output.dir="$tmp/bad"
}
bad truncated.pt2 7 "truncated.pt2: "
bad newer_schema.pt2 7 "schema 99\\..* reads schema 8\\.x"
bad missing_op.pt2 5 "node relu: no loaded library registers operator 'qfx_missing::relu'"
bad training_mode.pt2 5 "writes bn1.num_batches_tracked in place; export the model in eval mode"
$PY -c "
import json, zipfile
src = zipfile.ZipFile('$FIXTURES/dynamic_batch.pt2')
with zipfile.ZipFile('$tmp/huge_major.pt2', 'w') as out:
    for n in src.namelist():
        d = src.read(n)
        if n.endswith('models/model.json'):
            j = json.loads(d); j['schema_version']['major'] = 2 ** 70; d = json.dumps(j).encode()
        out.writestr(n, d)"
check "qfx ptq on a .pt2 whose schema major is 2^70: the number as written" 7 "exported-program schema 1.1805916207174113e\\+21\\..* reads schema 8\\.x" -- \
  "$QFX" ptq --set model.path="$tmp/huge_major.pt2" --set output.dir="$tmp/bad"
check "no output folder after the failures" 0 "^none$" -- bash -c "[ -e '$tmp/bad' ] && echo left || echo none"

# A BatchNorm1d no layer precedes (EfficientViT's head: pooled features -> BatchNorm1d ->
# Linear): ONNX BatchNormalization in float; ONNX Runtime runs the int8 model as qfx.
$PY - "$tmp/bn1d_head.pt2" <<'EOF'
import sys, torch
torch.manual_seed(0)
class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 10)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5); self.bn.running_var.uniform_(0.5, 2); self.bn.weight.uniform_(0.5, 1.5)
    def forward(self, x):
        return self.fc(self.bn(torch.relu(self.conv(x)).mean((2, 3))))
m = Head().eval()
ep = torch.export.export(m, (torch.randn(2, 3, 32, 32),), dynamic_shapes=({0: torch.export.Dim("batch")},))
torch.export.save(ep, sys.argv[1])
EOF
check "qfx ptq: a BatchNorm1d after pooling (no layer to fold into)" 0 "output: cosine int8 vs fp32 0\\.99" -- \
  "$QFX" ptq --set model.path="$tmp/bn1d_head.pt2" --set "model.input_shape=[-1, 3, 32, 32]" \
  --set "calibration.data={format: npy, images: $tmp/x32.npy}" --set "evaluation.data={format: npy, images: $tmp/x32.npy}" \
  --set evaluation.metric=cosine --set output.dir="$tmp/bn1d"
int8_vs_ort "BatchNorm1d: one ONNX BatchNormalization in float; ONNX Runtime equals qfx" "$tmp/bn1d" x32 "
import onnx
bn = [n for n in onnx.load('$tmp/bn1d/model_int8.onnx').graph.node if n.op_type == 'BatchNormalization']
ok = len(bn) == 1 and np.abs(y - q).max() <= 1e-4 * np.abs(q).max()
print('ok' if ok else 'bad', len(bn), np.abs(y - q).max())"
# A `with torch.autocast(..., enabled=False)` block (EfficientViT's attention): its
# subgraph is read into the graph; an enabled region (reduced precision) is refused.
$PY - "$tmp" <<'EOF'
import sys, torch
class Block(torch.nn.Module):
    def __init__(self, enabled):
        super().__init__()
        self.enabled, self.conv, self.fc = enabled, torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Linear(8, 10)
    def forward(self, x):
        y = torch.relu(self.conv(x))
        with torch.autocast("cpu", enabled=self.enabled):
            y = y.float().mean((2, 3)) * 2
        return self.fc(y)
torch.manual_seed(0)
for enabled in (False, True):
    ep = torch.export.export(Block(enabled).eval(), (torch.randn(2, 3, 32, 32),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(ep, f"{sys.argv[1]}/autocast_{'on' if enabled else 'off'}.pt2")
EOF
check "qfx ptq: a disabled autocast region (wrap_with_autocast) is read into the graph" 0 "output: cosine int8 vs fp32 0\\.99" -- \
  "$QFX" ptq --set model.path="$tmp/autocast_off.pt2" --set "model.input_shape=[-1, 3, 32, 32]" \
  --set "calibration.data={format: npy, images: $tmp/x32.npy}" --set "evaluation.data={format: npy, images: $tmp/x32.npy}" \
  --set evaluation.metric=cosine --set output.dir="$tmp/autocast"
check "... an enabled one is refused naming the node (exit 5)" 5 "wrap_with_autocast.*: an enabled torch.autocast region computes in reduced precision" -- \
  "$QFX" inspect "$tmp/autocast_on.pt2"
check_encodings "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
