#!/usr/bin/env bash
# Hostile input, one block per class of failure: output folders the atomic swap
# cannot take, over-long paths, archives that unpack to more than memory, images
# that resize to gigabytes, huge config values, ONNX parameters that are not
# finite, recurrent layers the runtime cannot run, plug-ins that throw, qconfig entries that match nothing, backend axes
# that cannot be honoured, .npy arrays with a zero dimension, models with dynamic
# height and width, input shapes past memory, ONNX external data that is not a regular
# file, labels outside the classes, int8 arithmetic at the ends of the integer ranges,
# and --nproc launches that cannot work or are killed. Each case: the documented exit code and a message
# naming the file, key or node (or the right result), never a crash.
# Needs: $QFX, $FIXTURES, $THROWING_PLUGIN, $QFX_PYTHON (numpy, torch, onnx, onnxruntime, PIL).
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"
quick=(--set calibration.num_samples=32 --set evaluation=null)

# ---- Output folders -------------------------------------------------------------
# A symbolic link to a folder on another file system: the folder it points to is
# replaced whole (staged beside it), the link stays a link.
other=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
mkdir -p "$other/target"; echo mine > "$other/target/notes.txt"; ln -s "$other/target" "$tmp/link_out"
check "output.dir is a symlink to another file system: files land in its target, the link and the user's file stay" 0 "^ok$" -- bash -c \
  "'$QFX' ptq ${quick[*]} --set output.dir='$tmp/link_out' >/dev/null 2>&1 || exit 1
   [ -L '$tmp/link_out' ] && [ -f '$other/target/model_int8.onnx' ] && grep -q mine '$other/target/notes.txt' &&
   ! ls -A '$other' | grep -q staging && echo ok"
rm -rf "$other"
# The current folder: not swapped (the user's shell would sit in a removed folder);
# its files are replaced one by one and the shell's folder still exists after.
mkdir -p "$tmp/here"
check "output.dir: . (the current folder): written in place, said so, the folder is still the shell's" 0 "^ok$" -- bash -c \
  "cd '$tmp/here' && '$QFX' ptq ${quick[*]} --set output.dir=. > '$tmp/here.log' 2>&1 || { cat '$tmp/here.log'; exit 1; }
   grep -q 'is the current folder or one above it' '$tmp/here.log' && [ -f model_int8.onnx ] && [ -d \"\$PWD\" ] &&
   [ \"\$(stat -c %i .)\" = \"\$(stat -c %i '$tmp/here')\" ] && ! ls -A | grep -q staging && echo ok"
# A mount point (a container volume's root): renaming it fails with EBUSY, so it is
# written in place too (a private mount namespace gives the test its own tmpfs).
mkdir -p "$tmp/mnt"
userns=""; [ "$(id -u)" -ne 0 ] && userns="-r"
check "output.dir is a mount point: written in place, nothing left staged" 0 "^ok$" -- unshare $userns -m bash -c \
  "mount -t tmpfs none '$tmp/mnt' || exit 2
   '$QFX' ptq ${quick[*]} --set output.dir='$tmp/mnt' > '$tmp/mnt.log' 2>&1 || { cat '$tmp/mnt.log'; exit 1; }
   grep -q 'is a mount point' '$tmp/mnt.log' && [ -f '$tmp/mnt/encodings.json' ] && ! ls -A '$tmp/mnt' | grep -q staging && echo ok"
# A bind mount of a folder on the same file system (same device as its parent, so it
# looks swappable): the exchange fails with EBUSY and the files go in one by one.
mkdir -p "$tmp/bind_src" "$tmp/bind_mnt"
check "output.dir is a bind mount on the same file system: written, nothing left staged" 0 "^ok$" -- unshare $userns -m bash -c \
  "mount --bind '$tmp/bind_src' '$tmp/bind_mnt' || exit 2
   '$QFX' ptq ${quick[*]} --set output.dir='$tmp/bind_mnt' > '$tmp/bind.log' 2>&1 || { cat '$tmp/bind.log'; exit 1; }
   [ -f '$tmp/bind_mnt/encodings.json' ] && [ -f '$tmp/bind_src/encodings.json' ] && ! ls -A '$tmp' | grep -q staging && echo ok"
# A user's symbolic link inside the output folder stays a link (not a copy of its tree).
mkdir -p "$tmp/linked/data" "$tmp/out_links"; echo x > "$tmp/linked/data/big.bin"; ln -s "$tmp/linked/data" "$tmp/out_links/data"
check "a symlink inside the output folder stays a symlink across a run" 0 "^ok$" -- bash -c \
  "'$QFX' ptq ${quick[*]} --set output.dir='$tmp/out_links' >/dev/null 2>&1 || exit 1
   [ -L '$tmp/out_links/data' ] && [ \"\$(readlink '$tmp/out_links/data')\" = '$tmp/linked/data' ] && [ -f '$tmp/out_links/model_int8.onnx' ] && echo ok"
check "an empty output.dir names the key" 3 "output.dir must not be empty" -- \
  "$QFX" ptq "${quick[@]}" --set output.dir=\"\"

# ---- Paths beyond what file systems allow -----------------------------------------
long=$(printf 'n%.0s' $(seq 1 300))
check "a 300-byte path component in model.path: ConfigError naming the key" 3 "model.path: the path component 'nnnn.*' is 300 bytes" -- \
  "$QFX" ptq "${quick[@]}" --set model.path="$tmp/$long/model.pt" --set output.dir="$tmp/o_long1"
check "a 300-byte path component in output.dir" 3 "output.dir: the path component .* is 300 bytes" -- \
  "$QFX" ptq "${quick[@]}" --set output.dir="$tmp/$long"
check "a 300-byte path component on the command line (qfx run): IoError, not an internal error" 7 "$long" -- \
  "$QFX" run "$tmp/$long.onnx" -i "$tmp/x.npy"

# ---- Archives that unpack to more than the limit ------------------------------------
size=$($PY -c "import zipfile; print(sum(i.file_size for i in zipfile.ZipFile('$FIXTURES/wrap_example.pt').infolist()))")
check "TorchScript archive larger unpacked than QFX_MAX_MODEL_BYTES: refused before loading" 7 "unpacks to .* QFX_MAX_MODEL_BYTES allows" -- \
  env QFX_MAX_MODEL_BYTES=$((size - 1)) "$QFX" inspect "$FIXTURES/wrap_example.pt"
check "... and one byte of room is enough (the size is read exactly, as Python's zipfile reads it)" 0 "_post_process" -- \
  env QFX_MAX_MODEL_BYTES=$size "$QFX" inspect "$FIXTURES/wrap_example.pt"
# A zip bomb in miniature: the directory claims 4 GB for one entry (ZIP64 size field).
$PY - "$FIXTURES/wrap_example.pt" "$tmp/bomb.pt" <<'EOF'
import struct, sys, zipfile
src, dst = sys.argv[1:]
with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as out:
    for i in z.infolist():
        out.writestr(i.filename, z.read(i.filename))
data = bytearray(open(dst, "rb").read())
cd = data.find(b"PK\x01\x02")           # the first central directory entry
data[cd + 24:cd + 28] = struct.pack("<I", 0xFFFFFFFE)
open(dst, "wb").write(data)
EOF
check "an archive whose directory claims 4 GB: refused against the limit, nothing unpacked" 7 "bomb.pt: the archive unpacks to 4[0-9]{3} MB" -- \
  env QFX_MAX_MODEL_BYTES=1000000000 "$QFX" inspect "$tmp/bomb.pt"
check "QFX_MAX_MODEL_BYTES that is not a number names the variable" 3 "QFX_MAX_MODEL_BYTES='lots'" -- \
  env QFX_MAX_MODEL_BYTES=lots "$QFX" inspect "$FIXTURES/wrap_example.pt"

# ---- Images that decode fine but resize to gigabytes --------------------------------
mkdir -p "$tmp/thin/a"
$PY -c "from PIL import Image; Image.new('RGB', (8000, 1)).save('$tmp/thin/a/strip.png')"
check "an 8000x1 image resized to 224 on its short side: DataError naming the file" 6 "strip.png: a 8000x1 image resized to 224 .* more than" -- \
  "$QFX" ptq --set "calibration.data={format: images, images: $tmp/thin, resize: 224, crop: 28, color: gray}" \
    --set evaluation=null --set output.dir="$tmp/o_thin"

# ---- A huge value in a config: the message is cut ------------------------------------
$PY -c "open('$tmp/huge.yaml', 'w').write('model:\n  path: m.pt\n  input_shape: [-1, 1, 28, 28]\ncalibration:\n  data: {format: npy, images: x.npy}\n  num_samples: ' + 'x' * 2000000 + '\n')"
check "a 2 MB config value: one short error line at its file:line:column" 3 "^ok$" -- bash -c \
  "out=\$('$QFX' ptq '$tmp/huge.yaml' 2>&1); rc=\$?; echo \"\$out\" | head -c 300;
   [ \$(echo \"\$out\" | wc -c) -lt 2000 ] && echo \"\$out\" | grep -q 'huge.yaml:6:16: calibration.num_samples .*more characters' && echo && echo ok; exit \$rc"

# ---- ONNX parameters that are not finite --------------------------------------------
$PY - "$tmp" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
for name, bad in (("nan_bias", np.nan), ("inf_weight", np.inf)):
    w = np.ones((2, 1, 3, 3), np.float32); b = np.zeros(2, np.float32)
    (b if name == "nan_bias" else w).flat[1] = bad
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv1", pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/{name}.onnx")
np.save(f"{d}/x8.npy", np.ones((1, 1, 8, 8), np.float32))
EOF
check "a NaN bias is named at load (node, initializer, element)" 6 "nan_bias.onnx: node 'conv1' \\(Conv\\) reads initializer 'b', whose element 1 is NaN" -- \
  "$QFX" run "$tmp/nan_bias.onnx" -i "$tmp/x8.npy"
check "an infinite weight is named at load" 6 "node 'conv1' \\(Conv\\) reads initializer 'w', whose element 1 is infinite" -- \
  "$QFX" run "$tmp/inf_weight.onnx" -i "$tmp/x8.npy" --backend reference

# ---- Recurrent layers the runtime cannot run as written ------------------------------
$PY - "$tmp" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d, S, N, I, H = sys.argv[1], 4, 2, 3, 5
def lstm(name, r_cols=H, extra_inputs=(), **attrs):
    inits = [numpy_helper.from_array(np.ones((1, 4 * H, I), np.float32), "W"),
             numpy_helper.from_array(np.ones((1, 4 * H, r_cols), np.float32), "R"),
             numpy_helper.from_array(np.full((N,), S, np.int32), "lens")]
    node = helper.make_node("LSTM", ["x", "W", "R", *extra_inputs], ["y"], name="rnn1", hidden_size=H, **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, N, I])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), f"{d}/{name}.onnx")
lstm("lstm_bad_r", r_cols=H + 1)
lstm("lstm_lens", extra_inputs=("", "lens"))
lstm("lstm_clip", clip=1.0)
np.save(f"{d}/seq.npy", np.ones((S, N, I), np.float32))
EOF
check "an LSTM whose R does not match W: DataError naming the node" 6 "rnn1.*R or hidden_size does not match W" -- \
  "$QFX" run "$tmp/lstm_bad_r.onnx" -i "$tmp/seq.npy"
check "an LSTM with sequence_lens: declined by name" 5 "rnn1.*sequence_lens" -- \
  "$QFX" run "$tmp/lstm_lens.onnx" -i "$tmp/seq.npy"
check "an LSTM with clip: declined by name" 5 "rnn1.*clip, input_forget or layout 1" -- \
  "$QFX" run "$tmp/lstm_clip.onnx" -i "$tmp/seq.npy"

# ---- Plug-ins whose registration throws ---------------------------------------------
check "a plug-in that throws while registering: its path and its message" 7 "libqfx_throwing_plugin.so: runtime plug-in failed while registering its kernels: vendor SDK libnpu.so.3 not found" -- \
  "$QFX" run "$FIXTURES/onnx/qdq_convnet.onnx" -i "input=$FIXTURES/onnx/qdq_convnet.in.npy" --plugin "$THROWING_PLUGIN"

# ---- qconfig entries that match nothing, axes that cannot be honoured ---------------
check "module_name / module_name_regex entries that match no module: a warning each, the run goes on" 0 "^2 ok$" -- bash -c \
  "'$QFX' ptq ${quick[*]} --set 'qconfig.module_name={layer9: null}' --set 'qconfig.module_name_regex={\"hed.*\": null}' \
     --set output.dir='$tmp/o_typo' > '$tmp/typo.log' 2>&1 || { cat '$tmp/typo.log'; exit 1; }
   echo \$(grep -cE \"warning: qconfig module_name(_regex)? '(layer9|hed.*)' matches no module\" '$tmp/typo.log') ok"
cfgs="$(dirname "$0")/../../configs/backends"
sed 's/ch_axis: 0/ch_axis: 1/' "$cfgs/reference.yaml" > "$tmp/axis1.yaml"
check "weight ch_axis 1 in a backend YAML: refused at its file:line:column" 3 "axis1.yaml:[0-9]+:[0-9]+: weight.ch_axis 1 cannot be honoured" -- \
  "$QFX" ptq "${quick[@]}" --set backend="$tmp/axis1.yaml" --set output.dir="$tmp/o_axis"

# ---- .npy arrays with a zero dimension, models with dynamic height and width --------
$PY - "$tmp" <<'EOF'
import sys, warnings, numpy as np, torch
warnings.filterwarnings("ignore")
d = sys.argv[1]
np.save(f"{d}/zero_mid.npy", np.zeros((3, 0, 4), np.float32))
class Net(torch.nn.Module):  # 3x3 windows without padding: height and width 1 do not fit
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1 = torch.nn.Conv2d(3, 8, 3); self.c2 = torch.nn.Conv2d(8, 4, 3)
    def forward(self, x):
        return torch.nn.functional.max_pool2d(torch.relu(self.c2(torch.relu(self.c1(x)))), 2)
x = torch.randn(1, 3, 20, 27)
torch.onnx.export(Net().eval(), (x,), f"{d}/dyn_hw.onnx", input_names=["x"], output_names=["y"], opset_version=13,
                  dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}}, dynamo=False)
for n, (h, w) in enumerate([(20, 27), (9, 13)]):
    np.save(f"{d}/dyn{n}.npy", np.random.default_rng(n).normal(size=(2, 3, h, w)).astype(np.float32))
EOF
check "an .npy array with a zero dimension after a non-zero one loads as empty (not 'truncated')" 6 "has shape \\[3, 0, 4\\]" -- \
  "$QFX" run "$tmp/dyn_hw.onnx" -i "$tmp/zero_mid.npy"
for n in 0 1; do
  check "dynamic height and width ($n): planned at the first run, equal to ONNX Runtime" 0 "^match" -- bash -c \
    "'$QFX' run '$tmp/dyn_hw.onnx' -i '$tmp/dyn$n.npy' -o '$tmp/dyn$n.out.npy' --explain > '$tmp/dyn$n.log' 2>&1 || { cat '$tmp/dyn$n.log'; exit 1; }
     grep -q 'Conv' '$tmp/dyn$n.log' || { echo 'no kernel report'; exit 1; }
     $PY -c \"
import numpy as np, onnxruntime as ort
x = np.load('$tmp/dyn$n.npy'); got = np.load('$tmp/dyn$n.out.npy')
ref = ort.InferenceSession('$tmp/dyn_hw.onnx', providers=['CPUExecutionProvider']).run(None, {'x': x})[0]
err = float(np.abs(got - ref).max() / np.abs(ref).max())
print('match' if got.shape == ref.shape and err < 1e-5 else f'differ {got.shape} {ref.shape} {err}')\""
done

# ---- Input shapes past what memory can hold (qfx run) -------------------------------
# A float model whose input declares a dimension of 2^40 (alone, twice, beside a
# dynamic batch), fed a small array: a DataError naming the input and the dimension,
# at load, for every op that multiplies or divides by the shape (no SIGFPE).
$PY - "$tmp" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d, B = sys.argv[1], 2**40
def save(name, nodes, xshape, inits=()):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, xshape)], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8), f"{d}/big_{name}.onnx")
w = nh.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
for pos in range(4):
    s = [1, 3, 8, 8]; s[pos] = B
    save(f"conv{pos}", [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("GlobalAveragePool", ["c"], ["p"]),
                        h.make_node("Flatten", ["p"], ["y"])], s, [w])
for pos in range(2):
    s = [2, 5]; s[pos] = B
    save(f"gemm{pos}", [h.make_node("Gemm", ["x", "gw"], ["y"], transB=1)], s, [nh.from_array(np.ones((4, 5), np.float32), "gw")])
    save(f"softmax{pos}", [h.make_node("Softmax", ["x"], ["y"])], s)
    save(f"reshape{pos}", [h.make_node("Reshape", ["x", "rs"], ["y"])], s, [nh.from_array(np.array([-1, 1], np.int64), "rs")])
    save(f"reducemean{pos}", [h.make_node("ReduceMean", ["x"], ["y"], axes=[1])], s)
save("twice", [h.make_node("Relu", ["x"], ["y"])], [B, B, 4])
save("dynamic_batch", [h.make_node("Relu", ["x"], ["y"])], ["N", B, B])
np.save(f"{d}/small4.npy", np.zeros((1, 3, 8, 8), np.float32)); np.save(f"{d}/small2.npy", np.zeros((2, 5), np.float32))
np.save(f"{d}/small3.npy", np.zeros((2, 5, 4), np.float32))
PYEOF
for m in conv0 conv1 conv2 conv3 gemm0 gemm1 softmax0 softmax1 reshape0 reshape1 reducemean0 reducemean1 twice dynamic_batch; do
  case $m in conv*) x=small4 ;; twice|dynamic_batch) x=small3 ;; *) x=small2 ;; esac
  check "qfx run: an input declaring a dimension of 2^40 ($m): DataError naming the input and the dimension" 6 \
    "input 'x' .*dimension [0-9] of 1099511627776" -- "$QFX" run "$tmp/big_$m.onnx" -i "$tmp/$x.npy"
done

# ---- ONNX external data that is not a regular file inside the model's folder --------
# A FIFO (opening it for reading blocks until a writer comes), a folder (reading one
# gives nothing: all-zero weights), a device, a symbolic link out of the folder, and
# offsets or lengths past the file's end: IoError (7) naming the tensor and the
# location, at once; no output folder. A symbolic link to a file inside the folder reads.
mkdir -p "$tmp/ext"
$PY - "$tmp/ext" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d = sys.argv[1]
w = nh.from_array(np.random.default_rng(0).normal(size=(4, 3, 3, 3)).astype(np.float32), "w")
g = h.make_graph([h.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 8, 8])], [h.make_tensor_value_info("y", T.FLOAT, ["N", 4, 8, 8])], [w])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
onnx.save(m, f"{d}/good.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
def variant(name, **kv):
    mm = onnx.load(f"{d}/good.onnx", load_external_data=False)
    t = mm.graph.initializer[0]
    entries = {e.key: e.value for e in t.external_data}
    entries.update(kv)
    del t.external_data[:]
    for k, v in entries.items():
        t.external_data.add(key=k, value=v)
    onnx.save(mm, f"{d}/{name}.onnx")
variant("fifo", location="fifo.bin"); variant("folder", location="folder.bin"); variant("device", location="null.bin")
variant("outside", location="outside_link.bin"); variant("inside", location="inside_link.bin")
variant("offset", offset="400"); variant("length", length="99"); variant("notanumber", offset="12abc")
np.save(f"{d}/x.npy", np.random.default_rng(1).normal(size=(8, 3, 8, 8)).astype(np.float32))
PYEOF
mkfifo "$tmp/ext/fifo.bin"; mkdir "$tmp/ext/folder.bin"; ln -s /dev/null "$tmp/ext/null.bin"
cp "$tmp/ext/w.bin" "$tmp/w_outside.bin"; ln -s "$tmp/w_outside.bin" "$tmp/ext/outside_link.bin"; ln -s w.bin "$tmp/ext/inside_link.bin"
ext_ptq=(--set "model.input_shape=[-1, 3, 8, 8]" --set "calibration.data={format: npy, images: $tmp/ext/x.npy}" --set evaluation=null)
for spec in "fifo:is not a regular file \\(a FIFO\\)" "folder:is not a regular file \\(a folder\\)" \
            "device:leads to /dev/null, outside the model's folder" "outside:leads to .*w_outside.bin, outside the model's folder" \
            "offset:holds 432 bytes; the tensor's 432 bytes at offset 400 lie past its end" \
            "length:external data length 99 bytes, the dims need 432" "notanumber:external data offset '12abc' is not a byte count"; do
  name=${spec%%:*}; pattern=${spec#*:}
  check "external data '$name': IoError naming the tensor and the location, at once" 7 "$name.onnx: tensor 'w'.*$pattern" -- \
    timeout 60 "$QFX" ptq --set model.path="$tmp/ext/$name.onnx" "${ext_ptq[@]}" --set output.dir="$tmp/o_ext_$name"
  test ! -e "$tmp/o_ext_$name" || { echo "FAIL external data '$name' left an output folder"; fail=$((fail+1)); }
done
check "qfx inspect on a model whose external data is a FIFO: refused at once (no hang)" 7 "is not a regular file \\(a FIFO\\)" -- \
  timeout 60 "$QFX" inspect "$tmp/ext/fifo.onnx"
check "external data through a symbolic link to a file inside the folder: qfx ptq reads it" 0 "wrote model_int8.onnx" -- \
  timeout 120 "$QFX" ptq --set model.path="$tmp/ext/inside.onnx" "${ext_ptq[@]}" --set output.dir="$tmp/o_ext_inside"
check "... and the int8 weights are not zero" 0 "^nonzero$" -- $PY -c "
import onnx, numpy as np
from onnx import numpy_helper as nh
m = onnx.load('$tmp/o_ext_inside/model_int8.onnx')
w = [nh.to_array(t) for t in m.graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 4]
print('nonzero' if w and all(np.count_nonzero(a) > 0 for a in w) else 'zero')"

# ---- qfx bench and qfx report take whatever qfx ptq takes --------------------------------
check "qfx bench on a float ONNX model: its fx graph in libtorch against the runtime" 0 "the ONNX model's fx graph in libtorch" -- \
  "$QFX" bench "$tmp/ext/good.onnx" --batch 1 --iters 2
check "qfx bench on a torch.export program (.pt2) alone: its fp32 graph exported in-process" 0 "the torch.export program's fx graph in libtorch" -- \
  "$QFX" bench "$FIXTURES/dynamic_batch.pt2" --size 16 --batch 1 --iters 2
check "qfx bench on the output folder of a job from a float ONNX model: int8 rows too" 0 "^# int8: .*model_int8.onnx" -- \
  "$QFX" bench "$tmp/o_ext_inside" --batch 1 --iters 2
check "qfx report on the output folder of a job from a float ONNX model" 0 "wrote .*report.html" -- "$QFX" report "$tmp/o_ext_inside"

# ---- Labels outside the model's classes (evaluation.metric: top1) -----------------------
$PY - "$tmp" <<'PYEOF'
import sys, numpy as np
d = sys.argv[1]
np.save(f"{d}/ev8.npy", np.random.default_rng(0).normal(size=(8, 1, 28, 28)).astype(np.float32))
for name, v in [("big", 1_000_000), ("neg", -5)]:
    l = np.arange(8, dtype=np.int64) % 10; l[3] = v; l[6] = v
    np.save(f"{d}/labels_{name}.npy", l)
PYEOF
for spec in "big:1000000" "neg:-5"; do
  name=${spec%%:*}; v=${spec#*:}
  check "top1 with a label of $v: DataError naming the labels file, the sample and the label" 6 \
    "labels_$name.npy: sample 3 has label $v, outside the model's 10 classes \\[0, 10\\) \\(2 of 8 labels" -- \
    "$QFX" ptq --set calibration.num_samples=32 --set "evaluation.data={format: npy, images: $tmp/ev8.npy, labels: $tmp/labels_$name.npy}" \
      --set evaluation.sqnr_samples=0 --set output.dir="$tmp/o_lab_$name"
  test ! -e "$tmp/o_lab_$name" || { echo "FAIL labels '$name' left an output folder"; fail=$((fail+1)); }
done

# ---- The int8 conv and gemm paths at the ends of every integer range ---------------------
# int32 bias +-2^31, weights and inputs at both ends, zero points 0 / 255 and -128 / 127:
# the reference and onednn backends equal ONNX Runtime bit for bit (int32 two's complement).
mkdir -p "$tmp/extremes"
check "int8 conv / gemm at the ends of the integer ranges: reference and onednn equal ONNX Runtime" 0 "^ok [0-9]+" -- \
  $PY "$(dirname "$0")/integer_extremes.py" "$QFX" "$tmp/extremes" reference onednn

# ---- The --nproc launcher: refused before any process, and no rank outlives it ----------
# Fewer calibration batches than processes: refused before a rank starts (at once,
# none left). SIGTERM at once after the start (while ranks are being started) and
# SIGKILL (nothing can forward it: the ranks die with their parent) leave no rank.
# (The ranks are found by their command line: this program, ptq, the run's output folder.)
check "qfx ptq --nproc 1000 with one calibration batch: refused before any rank starts" 0 "^3 fast none$" -- bash -c \
  "s=\$(date +%s%N); '$QFX' ptq --nproc 1000 --set calibration.num_samples=32 --set output.dir='$tmp/o_np1000' > '$tmp/np.log' 2>&1; rc=\$?
   ms=\$(( (\$(date +%s%N) - s) / 1000000 ))
   grep -q '1 calibration batches for 1000 processes' '$tmp/np.log' || { cat '$tmp/np.log'; exit 1; }
   echo \$rc \$([ \$ms -lt 20000 ] && echo fast || echo slow) \$(pgrep -f '^$QFX ptq.*o_np1000' >/dev/null && echo left || echo none)"
for spec in "TERM:143" "KILL:137"; do
  IFS=: read -r sig want <<<"$spec"
  check "SIG$sig to the qfx ptq --nproc 16 launcher as its first rank starts: no rank keeps running, no output" 0 "^$want 0 none$" -- bash -c "
    '$QFX' ptq --nproc 16 --set calibration.num_samples=2048 --set evaluation.num_samples=10000 --set output.dir='$tmp/o_sig_$sig' >/dev/null 2>&1 &
    pid=\$!
    for i in \$(seq 1 1500); do pgrep -P \$pid >/dev/null && break; sleep 0.02; done
    kill -$sig \$pid; wait \$pid; rc=\$?
    for i in \$(seq 1 100); do pgrep -f '^$QFX ptq.*o_sig_$sig' >/dev/null || break; sleep 0.1; done
    echo \$rc \$(pgrep -f '^$QFX ptq.*o_sig_$sig' | wc -l) \$([ -e '$tmp/o_sig_$sig' ] && echo left || echo none)"
done

# ---- Data sets that hold nothing -------------------------------------------------------
$PY -c "import numpy as np; np.save('$tmp/empty.npy', np.zeros((0, 1, 28, 28), np.float32)); np.save('$tmp/empty_l.npy', np.zeros(0, np.int64))"
check "an empty evaluation set: DataError before any work (not a libtorch message)" 6 "evaluation saw no samples: evaluation.data holds none" -- \
  "$QFX" ptq --set calibration.num_samples=32 --set "evaluation.data={format: npy, images: $tmp/empty.npy, labels: $tmp/empty_l.npy}" \
    --set output.dir="$tmp/o_ev0"
check "qfx qat on an empty training set: DataError naming it" 6 "training saw no samples: training.data holds none" -- \
  "$QFX" qat --set "training.data={format: npy, images: $tmp/empty.npy, labels: $tmp/empty_l.npy}" --set output.dir="$tmp/o_tr0"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
