# The int8 conv and gemm paths at the ends of every integer range, on each backend,
# against ONNX Runtime: QDQ models whose int32 bias is +-2^31 (and 100 inside it),
# weights at -128 / 127 / 0 (and -64 / 64), inputs at both ends of uint8 and int8 with zero points at
# both ends (0 / 255, -128 / 127), output zero points at both ends. ONNX Runtime's
# integer kernels (its QDQ fusion into QLinearConv / QGemm) add the bias to the int32
# accumulator in two's complement; qfx must give the same outputs bit for bit.
# A sum that leaves int32 by accumulation alone (66,000 products of 255 x 127) is
# checked against int32 wraparound computed here: ONNX Runtime's AVX2 uint8 x int8
# kernel saturates pairs of products to int16 first, so it is no reference there.
# Usage: integer_extremes.py QFX WORKDIR BACKEND...   prints "ok N" or the differences.
import itertools
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

qfx, work, backends = sys.argv[1], sys.argv[2], sys.argv[3:]
I32MAX, I32MIN = 2**31 - 1, -(2**31)
BIASES = [I32MAX, I32MIN, I32MAX - 100, I32MIN + 100, 0, 12345]
# Weights at the ends of int8, and at the ends of what oneDNN computes exactly without
# VNNI (uint8 x [-64, 64]; it leaves the others to the reference kernels).
WEIGHT_SETS = {"w8": [-128, 127, 0], "w7": [-64, 64, 0]}
YS = 2.0**24  # output scale: accumulators near +-2^31 land inside the code range


def qdq_model(kind, xdt, zx, zy, C, w, bias):
    """x (float) -> Q/DQ -> Conv 1x1 or Gemm(transB) with int8 weights w [M, C] and int32 bias -> Q/DQ."""
    M = w.shape[0]
    inits = [nh.from_array(np.array(1.0, np.float32), "sx"), nh.from_array(np.array(zx, xdt), "zx"),
             nh.from_array(np.array(YS, np.float32), "sy"), nh.from_array(np.array(zy, xdt), "zy"),
             nh.from_array(np.ones(M, np.float32), "sw"), nh.from_array(np.zeros(M, np.int8), "zw"),
             nh.from_array(np.ones(M, np.float32), "sb"), nh.from_array(np.zeros(M, np.int32), "zb"),
             nh.from_array(np.asarray(bias, np.int32), "bq"),
             nh.from_array(w.astype(np.int8).reshape((M, C, 1, 1) if kind == "conv" else (M, C)), "wq")]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0),
             h.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"], axis=0),
             h.make_node("Conv", ["xd", "wd", "bd"], ["y"]) if kind == "conv"
             else h.make_node("Gemm", ["xd", "wd", "bd"], ["y"], transB=1),
             h.make_node("QuantizeLinear", ["y", "sy", "zy"], ["yq"]),
             h.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["out"])]
    xs = ["N", C, 1, 1] if kind == "conv" else ["N", C]
    ys = ["N", M, 1, 1] if kind == "conv" else ["N", M]
    g = h.make_graph(nodes, kind, [h.make_tensor_value_info("x", T.FLOAT, xs)], [h.make_tensor_value_info("out", T.FLOAT, ys)],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def run_qfx(path, x, backend):
    np.save(path + "_x.npy", x)
    r = subprocess.run([qfx, "run", path + ".onnx", "-i", path + "_x.npy", "-o", path + "_y.npy", "--backend", backend],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL qfx run {path}.onnx --backend {backend}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return np.load(path + "_y.npy")


cases, bad = 0, []
for kind, (xdt, zx), zy_end, wset in itertools.product(["conv", "gemm"], [(np.uint8, 0), (np.uint8, 255), (np.int8, -128), (np.int8, 127)],
                                                      [0, 1], WEIGHT_SETS):
    info = np.iinfo(xdt)
    zy = [info.min, info.max][zy_end]
    pairs = list(itertools.product(BIASES, WEIGHT_SETS[wset]))
    w = np.array([p[1] for p in pairs]).reshape(-1, 1)
    bias = [p[0] for p in pairs]
    model = qdq_model(kind, xdt, zx, zy, 1, w, bias)
    path = f"{work}/{kind}_{np.dtype(xdt).name}_zx{zx}_zy{zy}_{wset}"
    onnx.save(model, path + ".onnx")
    codes = np.array([info.min, info.max, zx], np.float32)  # x codes; sx = 1
    x = (codes - zx).reshape((3, 1, 1, 1) if kind == "conv" else (3, 1)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for b in backends:
        got = run_qfx(path, x, b)
        cases += want.size
        if not np.array_equal(got, want):
            i = np.argwhere(got != want)[0]
            bad.append(f"{path}.onnx on {b}: {int((got != want).sum())} of {want.size} outputs differ, first at {tuple(i)}: "
                       f"qfx {got[tuple(i)]}, ONNX Runtime {want[tuple(i)]}")

# Accumulation alone past int32: C products of (255 - 0) x 127, no bias.
C = 66_000
model = qdq_model("conv", np.uint8, 0, 0, C, np.full((1, C), 127), [0])
path = f"{work}/conv_long_sum"
onnx.save(model, path + ".onnx")
x = np.full((1, C, 1, 1), 255, np.float32)
acc = C * 255 * 127
wrapped = (acc + 2**31) % 2**32 - 2**31
want = np.float32(np.clip(np.round(np.float32(wrapped) / np.float32(YS)), 0, 255) * YS)
for b in backends:
    got = run_qfx(path, x, b)
    cases += 1
    if got.ravel()[0] != want:
        bad.append(f"{path}.onnx on {b}: {got.ravel()[0]}, int32 wraparound gives {want} (sum {acc})")

if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"ok {cases}")
