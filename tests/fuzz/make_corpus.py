#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora into tests/fuzz/corpus/<target>/ (committed).

Usage: make_corpus.py FIXTURE_DIR   (the build's fixtures/, for the small ONNX models)
Seeds are small, valid inputs of every kind each reader accepts; libFuzzer mutates
from them. Rerun only to change the seeds.
"""
import gzip, io, os, struct, sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus")


def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- npy -------------------------------------------------------------------------
for name, arr in {
    "f32_2x3": np.arange(6, dtype=np.float32).reshape(2, 3),
    "u8_vec": np.array([0, 7, 255], dtype=np.uint8),
    "i64_scalar": np.array(-5, dtype=np.int64),
    "i32_3d": np.arange(24, dtype=np.int32).reshape(2, 3, 4),
    "f32_fortran": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
    "f64": np.zeros(3, dtype=np.float64),
    "empty": np.zeros((0, 4), dtype=np.float32),
}.items():
    b = io.BytesIO()
    np.save(b, arr)
    put("npy", name + ".npy", b.getvalue())
b = io.BytesIO()
np.lib.format.write_array(b, np.ones((2, 2), np.float32), version=(2, 0))
put("npy", "v2.npy", b.getvalue())


# --- IDX -------------------------------------------------------------------------
def idx(arr, code=0x08):
    head = struct.pack(">BBBB", 0, 0, code, arr.ndim) + b"".join(struct.pack(">I", d) for d in arr.shape)
    return head + arr.astype(">u1" if code == 0x08 else ">i4").tobytes()


imgs = (np.arange(3 * 4 * 5) % 256).astype(np.uint8).reshape(3, 4, 5)
put("idx", "images_3x4x5.idx", idx(imgs))
put("idx", "images_3x4x5.idx.gz", gzip.compress(idx(imgs), mtime=0))
put("idx", "labels_3.idx", idx(np.array([0, 1, 2], np.uint8)))
put("idx", "int32_2x2x2.idx", idx(np.arange(8, dtype=np.int32).reshape(2, 2, 2), 0x0C))

# --- images ----------------------------------------------------------------------
rgb = np.stack(np.meshgrid(np.arange(7) * 30, np.arange(5) * 40), -1)
rgb = np.concatenate([rgb, (rgb[..., :1] + rgb[..., 1:]) // 2], -1).astype(np.uint8)
for mode, name in [("RGB", "rgb"), ("L", "gray"), ("RGBA", "rgba"), ("P", "palette"), ("I;16", "gray16")]:
    im = Image.fromarray(rgb).convert(mode) if mode != "I;16" else Image.fromarray(rgb[..., 0].astype(np.uint16) * 256)
    b = io.BytesIO()
    im.save(b, format="PNG")
    put("image", name + ".png", b.getvalue())
for mode, name, kw in [("RGB", "rgb", {}), ("L", "gray", {}), ("RGB", "progressive", {"progressive": True}),
                       ("CMYK", "cmyk", {})]:
    b = io.BytesIO()
    Image.fromarray(rgb).convert(mode).save(b, format="JPEG", quality=80, **kw)
    put("image", name + ".jpg", b.getvalue())

# --- YAML ------------------------------------------------------------------------
root = os.path.dirname(os.path.dirname(here))
for sub in ["configs/ptq", "configs/backends", "configs/examples", "configs/qat"]:
    d = os.path.join(root, sub)
    for f in sorted(os.listdir(d)):
        if f.endswith(".yaml"):
            with open(os.path.join(d, f), "rb") as fh:
                put("yaml", sub.split("/")[1] + "_" + f, fh.read())

# --- ONNX ------------------------------------------------------------------------
fixtures = sys.argv[1] if len(sys.argv) > 1 else None
if fixtures:
    for f in ["qdq_convnet.onnx", "qdq_s8.onnx", "zoo.onnx", "unsupported.onnx"]:
        with open(os.path.join(fixtures, "onnx", f), "rb") as fh:
            put("onnx", f, fh.read())


def model(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    put("onnx", name + ".onnx", m.SerializeToString())


f32 = TensorProto.FLOAT
x = helper.make_tensor_value_info("x", f32, [1, 2, 4, 4])
y = helper.make_tensor_value_info("y", f32, None)
w = numpy_helper.from_array(np.full((2, 2, 3, 3), 0.1, np.float32), "w")
bias = numpy_helper.from_array(np.zeros(2, np.float32), "b")
model("conv_relu_pool", [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                         helper.make_node("Relu", ["c"], ["r"]),
                         helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], [x], [y], [w, bias])
lo = numpy_helper.from_array(np.array(0, np.float32), "lo")
hi = numpy_helper.from_array(np.array(6, np.float32), "hi")
model("clip_add_mul", [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
                       helper.make_node("Add", ["c", "x"], ["a"]),
                       helper.make_node("Mul", ["a", "c"], ["y"])], [x], [y], [lo, hi])
shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
wm = numpy_helper.from_array(np.full((32, 3), 0.2, np.float32), "wm")
model("transpose_reshape_matmul", [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
                                   helper.make_node("Reshape", ["t", "shape"], ["r"]),
                                   helper.make_node("MatMul", ["r", "wm"], ["y"])], [x], [y], [shape, wm])
wg = numpy_helper.from_array(np.full((5, 2), 0.3, np.float32), "wg")
model("gap_flatten_gemm", [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
                           helper.make_node("Flatten", ["g"], ["f"]),
                           helper.make_node("Gemm", ["f", "wg"], ["y"], transB=1)], [x], [y], [wg])
model("concat_avgpool", [helper.make_node("Concat", ["x", "x"], ["c"], axis=1),
                         helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], [x], [y])
s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
z = numpy_helper.from_array(np.array(128, np.uint8), "z")
model("qdq_add", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
                  helper.make_node("Add", ["d", "d"], ["a"]),
                  helper.make_node("QuantizeLinear", ["a", "s", "z"], ["q2"]),
                  helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"])], [x], [y], [s, z])
# --- onnx_model (the float ONNX reader): the float models above and the small CNN of
# export_float_onnx.py (torch's TorchScript-based exporter: Constant nodes, scoped names)
for f in sorted(os.listdir(os.path.join(out, "onnx"))):
    if not f.startswith("qdq_"):
        with open(os.path.join(out, "onnx", f), "rb") as fh:
            put("onnx_model", f, fh.read())
with open(os.path.join(sys.argv[1], "small_cnn.onnx"), "rb") as fh:
    put("onnx_model", "legacy_small_cnn.onnx", fh.read())
# --- onnx_external (the float ONNX reader on external data): [u32 model length]
# [model.onnx][weights.bin], every initializer in weights.bin
import tempfile
for f in ["conv_relu_pool.onnx", "gap_flatten_gemm.onnx"]:
    m = onnx.load(os.path.join(out, "onnx", f))
    with tempfile.TemporaryDirectory() as d:
        onnx.save_model(m, os.path.join(d, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                        location="weights.bin", size_threshold=0)
        with open(os.path.join(d, "model.onnx"), "rb") as fh:
            mb = fh.read()
        with open(os.path.join(d, "weights.bin"), "rb") as fh:
            wb = fh.read()
    put("onnx_external", f.replace(".onnx", ".bin"), struct.pack("<I", len(mb)) + mb + wb)

# --- pt2 (the exported-program reader): the records of small torch.export.save
# archives as [u8 name length][name][u32 length][content] (the zip's own bookkeeping
# records and the sample inputs left out)
import zipfile
for f in ["act_net", "norm_net", "dynamic_batch", "gru_net"]:
    z = zipfile.ZipFile(os.path.join(sys.argv[1], f + ".pt2"))
    b = b""
    for i in z.infolist():
        name = i.filename.split("/", 1)[1]
        if name in (".data/version", "byteorder", ".data/serialization_id") or name.startswith("data/sample_inputs"):
            continue
        data = z.read(i)
        b += struct.pack("<B", len(name)) + name.encode() + struct.pack("<I", len(data)) + data
    put("pt2", f + ".bin", b)
print("corpus written to", out)
