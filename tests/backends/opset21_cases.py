"""Small ONNX models of opsets 18..21 for the runtime's opset test (opset21_test.cpp):
block-wise DequantizeLinear / QuantizeLinear over INT4, UINT4, INT8, UINT8 (opset 21),
4-bit and 16-bit initializers, MatMul / Gemm on block-wise INT4 weights (W4A16, and
with QDQ uint8 activations around them), Reduce* with axes as an input (opset 18),
ops whose opset 18..21 versions changed, and models the runtime must refuse.

    python opset21_cases.py DIR    writes DIR/NAME.onnx, DIR/NAME.inK.npy, DIR/NAME.ort.npy
                                   (DIR/NAME.tol.npy for `bound`), and DIR/cases.txt

The expected outputs are ONNX Runtime's (CPU, graph optimizations off, so its
DequantizeLinear and MatMul run as the graph says: with them on it fuses DQ + MatMul
into MatMulNBits, which may quantize the activations). cases.txt holds one line per
model: NAME MODE TOL INPUTS INT8_OPS [TEXT]. MODE: exact (equal values), rel (within
TOL of the largest magnitude, at least 1), bound (within NAME.tol.npy element by
element), units (within TOL in absolute value), refuses (loading throws an error
whose message holds TEXT). INT8_OPS: the int8 ops qfx must form (-1: not checked).
"""
import os
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

RNG = np.random.default_rng(21)
RANGE = {TP.INT4: (-8, 7), TP.UINT4: (0, 15), TP.INT8: (-128, 127), TP.UINT8: (0, 255),
         TP.INT16: (-32768, 32767), TP.UINT16: (0, 65535)}
NP = {TP.INT4: ml_dtypes.int4, TP.UINT4: ml_dtypes.uint4, TP.INT8: np.int8, TP.UINT8: np.uint8,
      TP.INT16: np.int16, TP.UINT16: np.uint16}
EPS32 = 2.0 ** -24


def codes(t, shape):
    """Random codes of ONNX type t, the range's ends at the first and last positions."""
    lo, hi = RANGE[t]
    a = RNG.integers(lo, hi + 1, shape)
    flat = a.reshape(-1)
    flat[0], flat[-1] = lo, hi
    return a


def tensor(name, t, a, raw=True):
    """An initializer of ONNX type t: raw_data (numpy_helper, 4-bit packed) or the
    typed field (onnx.helper.make_tensor: int32_data, 4-bit packed two per entry)."""
    if raw:
        return numpy_helper.from_array(np.asarray(a).astype(NP[t]), name)
    return helper.make_tensor(name, t, list(np.shape(a)), np.asarray(a).reshape(-1).tolist())


class Writer:
    def __init__(self, out):
        self.out, self.lines = out, []

    def model(self, name, nodes, inputs, inits, outputs, opset):
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                                            for n, a in inputs], outputs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
        onnx.save(m, os.path.join(self.out, name + ".onnx"))
        for k, (_, a) in enumerate(inputs):
            np.save(os.path.join(self.out, "%s.in%d.npy" % (name, k)), a)
        return m

    def case(self, name, nodes, inputs, inits, mode, tol=0.0, opset=21, int8_ops=-1, ydt=TP.FLOAT, tol_array=None):
        """A model with graph output 'y', run by ONNX Runtime for the expected output."""
        import onnxruntime as ort
        m = self.model(name, nodes, inputs, inits, [helper.make_tensor_value_info("y", ydt, None)], opset)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        y = sess.run(None, {n: a for n, a in inputs})[0]
        if y.dtype in (ml_dtypes.int4, ml_dtypes.uint4):  # qfx stores 4-bit codes in 8 bits
            y = y.astype(np.int8 if y.dtype == ml_dtypes.int4 else np.uint8)
        if y.dtype == np.uint16:  # and uint16 codes in int32
            y = y.astype(np.int32)
        np.save(os.path.join(self.out, name + ".ort.npy"), y)
        if tol_array is not None:
            np.save(os.path.join(self.out, name + ".tol.npy"), tol_array.astype(np.float32))
        self.lines.append("%s %s %g %d %d" % (name, mode, tol, len(inputs), int8_ops))

    def refuses(self, name, nodes, inputs, inits, text, opset=21):
        self.model(name, nodes, inputs, inits, [helper.make_tensor_value_info("y", TP.FLOAT, None)], opset)
        self.lines.append("%s refuses 0 %d -1 %s" % (name, len(inputs), text))

    def finish(self):
        with open(os.path.join(self.out, "cases.txt"), "w") as fh:
            fh.write("\n".join(self.lines) + "\n")


def blocked_qparams(t, shape, axis, block, with_zp=True):
    """Scale (and zero point) of x's shape with ceil(D / block) at the axis."""
    s = list(shape)
    s[axis] = (shape[axis] + block - 1) // block
    scale = RNG.uniform(0.002, 0.05, s).astype(np.float32)
    return scale, (codes(t, s) if with_zp else None)


def dq_node(x, block, axis, zp=True, out="y"):
    return helper.make_node("DequantizeLinear", [x, x + "_s"] + ([x + "_z"] if zp else []), [out], axis=axis, block_size=block)


def blocked_dequantize_cases(w):
    """DequantizeLinear per block of constant codes: every type, block 16 / 32 / 128,
    a short last block, odd element counts (a 4-bit padding nibble), axis 0 and 1,
    raw_data and typed storage, no zero point; exact."""
    for t, tn in ((TP.INT4, "int4"), (TP.UINT4, "uint4"), (TP.INT8, "int8"), (TP.UINT8, "uint8")):
        for block in (16, 32, 128):
            for axis in (0, 1):
                d = 2 * block + 5  # two full blocks and a short one
                shape = (d, 3) if axis == 0 else (3, d)  # 3 * odd: an odd element count
                x = codes(t, shape)
                scale, zp = blocked_qparams(t, shape, axis, block)
                raw = (block + axis) % 2 == 0
                inits = [tensor("w", t, x, raw), numpy_helper.from_array(scale, "w_s"), tensor("w_z", t, zp, raw)]
                w.case("dq_%s_b%d_axis%d" % (tn, block, axis), [dq_node("w", block, axis)], [], inits, "exact")
    x = codes(TP.INT4, (7, 40))
    scale, _ = blocked_qparams(TP.INT4, (7, 40), 1, 16, with_zp=False)
    w.case("dq_int4_no_zero_point", [dq_node("w", 16, 1, zp=False)], [],
           [tensor("w", TP.INT4, x), numpy_helper.from_array(scale, "w_s")], "exact")
    # Codes computed at run time (a graph input), blocked along the last axis of a 3-D value.
    x = codes(TP.INT8, (2, 3, 50)).astype(np.int8)
    scale, zp = blocked_qparams(TP.INT8, x.shape, 2, 16)
    w.case("dq_int8_input_b16", [dq_node("w", 16, -1)], [("w", x)],
           [numpy_helper.from_array(scale, "w_s"), tensor("w_z", TP.INT8, zp)], "exact")
    # A 4-bit tensor as a Constant node, not an initializer.
    c = helper.make_node("Constant", [], ["w"], value=tensor("wc", TP.UINT4, codes(TP.UINT4, (5, 33))))
    scale, zp = blocked_qparams(TP.UINT4, (5, 33), 1, 32)
    w.case("dq_uint4_constant_node", [c, dq_node("w", 32, 1)], [],
           [numpy_helper.from_array(scale, "w_s"), tensor("w_z", TP.UINT4, zp)], "exact")


def narrow_type_cases(w):
    """Per-tensor / per-axis opset-21 forms over 4-bit and 16-bit codes, QuantizeLinear
    to 4-bit and uint16 (saturating to the type's range), blocked QuantizeLinear."""
    for t, tn in ((TP.INT16, "int16"), (TP.UINT16, "uint16"), (TP.INT4, "int4")):
        for raw in (True, False):
            x = codes(t, (4, 9))
            inits = [tensor("w", t, x, raw), numpy_helper.from_array(np.float32(0.01), "w_s"), tensor("w_z", t, codes(t, ()), raw)]
            node = helper.make_node("DequantizeLinear", ["w", "w_s", "w_z"], ["y"])
            w.case("dq_%s_per_tensor_%s" % (tn, "raw" if raw else "typed"), [node], [], inits, "exact")
    x = codes(TP.UINT4, (4, 9))
    inits = [tensor("w", TP.UINT4, x), numpy_helper.from_array(RNG.uniform(0.01, 0.1, 9).astype(np.float32), "w_s"),
             tensor("w_z", TP.UINT4, codes(TP.UINT4, (9,)))]
    w.case("dq_uint4_per_axis", [helper.make_node("DequantizeLinear", ["w", "w_s", "w_z"], ["y"], axis=1)], [], inits, "exact")
    xf = (RNG.normal(0, 1, (3, 40)) * 0.3).astype(np.float32)
    for t, tn in ((TP.INT4, "int4"), (TP.UINT4, "uint4"), (TP.UINT16, "uint16")):
        zp = codes(t, ())
        inits = [numpy_helper.from_array(np.float32(0.05 if t != TP.UINT16 else 1e-5), "s"), tensor("z", t, zp)]
        q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])  # ORT gives no NumPy 4-bit output: Cast
        w.case("q_%s_per_tensor" % tn, [q, helper.make_node("Cast", ["q"], ["y"], to=TP.INT32)], [("x", xf)], inits, "exact",
               ydt=TP.INT32)
    q = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=TP.INT4)
    w.case("q_int4_output_dtype", [q, helper.make_node("Cast", ["q"], ["y"], to=TP.INT32)], [("x", xf)],
           [numpy_helper.from_array(np.float32(0.05), "s")], "exact", ydt=TP.INT32)
    for t, tn in ((TP.INT4, "int4"), (TP.UINT8, "uint8")):
        scale, zp = blocked_qparams(t, xf.shape, 1, 16)
        q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=16)
        dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=16)
        w.case("qdq_%s_blocked" % tn, [q, dq], [("x", xf)],
               [numpy_helper.from_array(scale * 4, "s"), tensor("z", t, zp)], "exact")


def matmul_bound(x, wf):
    """|qfx - ORT| bound of a float32 dot product of length K summed in any order:
    each result is within K * 2^-24 * sum|x_k w_k| of the exact value (Higham's
    gamma_K), so two within twice that of each other."""
    k = wf.shape[0]
    return 2 * k * EPS32 * (np.abs(x.astype(np.float64)) @ np.abs(wf.astype(np.float64))) + 1e-30


def weight_only_cases(w):
    """MatMul / Gemm on block-wise INT4 / UINT4 weights (W4A16), and with QDQ uint8
    activations around the MatMul (W4A8 simulated): float MatMul on the weight
    dequantized once; no int8 op may form."""
    from onnx.reference import ReferenceEvaluator
    K, N = 96, 24
    for t, tn, block in ((TP.INT4, "int4", 32), (TP.UINT4, "uint4", 16), (TP.INT4, "int4", 128)):
        wq = codes(t, (K, N))
        scale, zp = blocked_qparams(t, (K, N), 0, block)
        inits = [tensor("w", t, wq), numpy_helper.from_array(scale, "w_s"), tensor("w_z", t, zp)]
        wf = ReferenceEvaluator(helper.make_model(helper.make_graph(
            [dq_node("w", block, 0)], "w", [], [helper.make_tensor_value_info("y", TP.FLOAT, None)], inits),
            opset_imports=[helper.make_opsetid("", 21)])).run(None, {})[0]
        x = RNG.normal(0, 1, (2, 3, K)).astype(np.float32)
        nodes = [dq_node("w", block, 0, out="wf"), helper.make_node("MatMul", ["x", "wf"], ["y"])]
        w.case("matmul_w%s_b%d" % (tn, block), nodes, [("x", x)], inits, "bound", int8_ops=0,
               tol_array=matmul_bound(x, wf))
    # The packed MatMulNBits kernel's paths (the runtime fuses each of these): 8-bit
    # codes, blocks that are not a multiple of 16 codes, a short last block, an odd
    # block (kept 8 bits wide), no zero point, rows in groups of four plus a rest, one
    # row over a long K (threads over columns), and more rows than it takes (oneDNN's
    # float matmul on the dequantized weight).
    for t, tn, K, N, block, rows, zp in ((TP.UINT8, "uint8", 200, 33, 64, 7, True), (TP.INT8, "int8", 120, 17, 40, 5, False),
                                         (TP.INT4, "int4", 99, 9, 33, 3, True), (TP.INT4, "int4", 1030, 64, 16, 1, True),
                                         (TP.UINT4, "uint4", 96, 24, 32, 40, False)):
        wq = codes(t, (K, N))
        scale, z = blocked_qparams(t, (K, N), 0, block, with_zp=zp)
        inits = [tensor("w", t, wq), numpy_helper.from_array(scale, "w_s")] + ([tensor("w_z", t, z)] if zp else [])
        zf = np.repeat(z, block, axis=0)[:K] if zp else 0
        wf = ((wq - zf) * np.repeat(scale, block, axis=0)[:K]).astype(np.float32)
        x = RNG.normal(0, 1, (rows, K)).astype(np.float32)
        nodes = [dq_node("w", block, 0, zp=zp, out="wf"), helper.make_node("MatMul", ["x", "wf"], ["y"])]
        w.case("matmul_w%s_b%d_k%d_m%d" % (tn, block, K, rows), nodes, [("x", x)], inits, "bound", int8_ops=0,
               tol_array=matmul_bound(x, wf))
    # Gemm with transB: the weight [N, K] blocked along K (axis 1), and a bias.
    wq = codes(TP.INT4, (N, K))
    scale, zp = blocked_qparams(TP.INT4, (N, K), 1, 32)
    bias = RNG.normal(0, 0.1, N).astype(np.float32)
    inits = [tensor("w", TP.INT4, wq), numpy_helper.from_array(scale, "w_s"), tensor("w_z", TP.INT4, zp),
             numpy_helper.from_array(bias, "b")]
    wf = ((wq - np.repeat(zp, 32, axis=1)[:, :K]) * np.repeat(scale, 32, axis=1)[:, :K]).astype(np.float32).T
    x = RNG.normal(0, 1, (5, K)).astype(np.float32)
    nodes = [dq_node("w", 32, 1, out="wf"), helper.make_node("Gemm", ["x", "wf", "b"], ["y"], transB=1)]
    w.case("gemm_wint4_transb", nodes, [("x", x)], inits, "bound", int8_ops=0,
           tol_array=matmul_bound(x, wf) + np.abs(bias) * EPS32 * 2)
    # W4A8: x -> Q(u8) -> DQ -> MatMul(DQ(int4 blocked)) -> Q(u8) -> DQ. The MatMul's
    # float sum may differ in its last bits, which can move a value across a rounding
    # boundary of the output QuantizeLinear: at most one output step (0.05).
    wq = codes(TP.INT4, (K, N))
    scale, zp = blocked_qparams(TP.INT4, (K, N), 0, 32)
    inits = [tensor("w", TP.INT4, wq), numpy_helper.from_array(scale, "w_s"), tensor("w_z", TP.INT4, zp),
             numpy_helper.from_array(np.float32(0.02), "xs"), numpy_helper.from_array(np.uint8(128), "xz"),
             numpy_helper.from_array(np.float32(0.05), "ys"), numpy_helper.from_array(np.uint8(120), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             dq_node("w", 32, 0, out="wf"), helper.make_node("MatMul", ["xd", "wf"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["mq"]),
             helper.make_node("DequantizeLinear", ["mq", "ys", "yz"], ["y"])]
    x = RNG.normal(0, 1, (4, K)).astype(np.float32)
    w.case("matmul_wint4_qdq_u8", nodes, [("x", x)], inits, "units", tol=0.05 * 1.0001, int8_ops=0)


def int8_activations_expected(x, B, scales, zp, K, N, bits, bs):
    """accuracy_level 4 as qfx defines it (backends/src/matmul_nbits.h): each row of x
    quantized per block to int8 (scale max|x| / 127, round half to even), exact integer
    dot products with the codes, and per block float32(dot - zero * sum(q)) *
    (w_scale * x_scale) added in block order in float32."""
    blocks = (K + bs - 1) // bs
    per = 8 // bits
    codes = np.zeros((N, blocks * bs), np.int64)
    for i in range(per):
        codes[:, i::per] = (B.reshape(N, -1).astype(np.int64) >> (bits * i)) & ((1 << bits) - 1)
    zeros = np.full((N, blocks), 1 << (bits - 1), np.int64)
    if zp is not None:
        for i in range(per):
            zeros[:, i::per] = ((zp.reshape(N, -1).astype(np.int64) >> (bits * i)) & ((1 << bits) - 1))[:, :zeros[:, i::per].shape[1]]
    y = np.zeros((x.shape[0], N), np.float32)
    for m in range(x.shape[0]):
        for b in range(blocks):
            a = x[m, b * bs:min(K, (b + 1) * bs)]
            mx = np.float32(np.abs(a).max())
            s = mx / np.float32(127) if mx > 0 else np.float32(1)
            q = np.clip(np.round(a / s), -127, 127).astype(np.int64)
            dot = codes[:, b * bs:b * bs + len(q)] @ q
            term = (dot - zeros[:, b] * q.sum()).astype(np.float32) * (scales.reshape(N, blocks)[:, b].astype(np.float32) * s)
            y[m] = (y[m] + term).astype(np.float32)
    return y


def int8_activation_cases(w):
    """ONNX Runtime's MatMulNBits with accuracy_level 4 (int8 activations), from its own
    MatMulNBitsQuantizer: qfx's result equals the definition computed here exactly on
    every backend (the expected output is NumPy's, not ONNX Runtime's, whose kernels
    differ in summation order; cases.txt's text names the cases checked against ONNX
    Runtime as well). Blocks of 64 and 32 codes (both vector layouts), 16 and 8-bit
    codes (the reference kernel), a short last block, columns past a panel, odd row
    counts, an all-zero row, zero points."""
    import copy
    import onnxruntime as ort
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    for K, N, bs, rows, bits, sym in ((256, 20, 64, 1, 4, True), (100, 9, 32, 3, 4, False), (300, 16, 128, 5, 4, False),
                                      (48, 6, 16, 2, 4, True), (64, 5, 32, 2, 8, False)):
        name = "matmul_nbits_int8_k%d_n%d_b%d_m%d_%dbit" % (K, N, bs, rows, bits)
        W = RNG.normal(0, 1, (K, N)).astype(np.float32)
        g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], name,
                              [helper.make_tensor_value_info("x", TP.FLOAT, [rows, K])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)], [numpy_helper.from_array(W, "W")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
        q = MatMulNBitsQuantizer(copy.deepcopy(m), algo_config=DefaultWeightOnlyQuantConfig(
            block_size=bs, is_symmetric=sym, bits=bits, accuracy_level=4))
        q.process()
        mq = q.model.model
        onnx.save(mq, os.path.join(w.out, name + ".onnx"))
        x = RNG.normal(0, 1, (rows, K)).astype(np.float32)
        if rows > 2:
            x[1] = 0  # a row whose blocks all quantize with scale 1
        np.save(os.path.join(w.out, name + ".in0.npy"), x)
        inits = {t.name: numpy_helper.to_array(t) for t in mq.graph.initializer}
        node = [n for n in mq.graph.node if n.op_type == "MatMulNBits"][0]
        zp = inits[node.input[3]] if len(node.input) > 3 and node.input[3] else None
        np.save(os.path.join(w.out, name + ".ort.npy"), int8_activations_expected(x, inits[node.input[1]], inits[node.input[2]], zp, K, N, bits, bs))
        y_ort = ort.InferenceSession(mq.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.save(os.path.join(w.out, name + ".onnxruntime.npy"), y_ort)
        w.lines.append("%s exact 0 1 0" % name)


def opset18_cases(w):
    """Reduce* with axes as input 1 (opset 18), noop_with_empty_axes, and ops whose
    opset 18..21 versions changed, against ONNX Runtime."""
    x = RNG.normal(0, 1, (2, 3, 4, 5)).astype(np.float32)
    axes = numpy_helper.from_array(np.array([1, -1], np.int64), "axes")
    empty = numpy_helper.from_array(np.zeros(0, np.int64), "none")
    for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
        exact = op in ("ReduceMax", "ReduceMin")
        for keep in (0, 1):
            node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)
            w.case("%s_axes_input_keep%d" % (op.lower(), keep), [node], [("x", x)], [axes],
                   "exact" if exact else "rel", 0 if exact else 1e-6, opset=18)
        node = helper.make_node(op, ["x", "none"], ["y"], noop_with_empty_axes=1)
        w.case("%s_noop_empty_axes" % op.lower(), [node], [("x", x)], [empty], "exact", opset=18)
        node = helper.make_node(op, ["x"], ["y"], keepdims=0)
        w.case("%s_all_axes" % op.lower(), [node], [("x", x)], [], "exact" if exact else "rel", 0 if exact else 1e-6, opset=18)
    xi = RNG.integers(-9, 9, (3, 7)).astype(np.int64)
    parts = [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3),
             helper.make_node("Concat", ["c", "a", "b"], ["y"], axis=1)]
    w.case("split_num_outputs", parts, [("x", xi)], [], "exact", opset=18, ydt=TP.INT64)
    pad = [helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], mode="reflect")]
    w.case("pad_axes_input", pad, [("x", x)], [numpy_helper.from_array(np.array([1, 2, 2, 1], np.int64), "p"),
                                               numpy_helper.from_array(np.array([1, 3], np.int64), "ax")], "exact", opset=19)
    data = RNG.normal(0, 1, (4, 5)).astype(np.float32)
    ind = numpy_helper.from_array(np.array([[0, 1, 1], [3, 3, 0]], np.int64), "i")
    upd = numpy_helper.from_array(RNG.normal(0, 1, (2, 3)).astype(np.float32), "u")
    for red in ("max", "min"):
        node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=red)
        w.case("scatter_elements_%s" % red, [node], [("x", data)], [ind, upd], "exact", opset=18)
        node = helper.make_node("ScatterND", ["x", "j", "v"], ["y"], reduction=red)
        w.case("scatter_nd_%s" % red, [node], [("x", data)],
               [numpy_helper.from_array(np.array([[1], [3], [1]], np.int64), "j"),
                numpy_helper.from_array(RNG.normal(0, 1, (3, 5)).astype(np.float32), "v")], "exact", opset=18)
    img = RNG.normal(0, 1, (1, 2, 9, 9)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], dilations=[2, 2], pads=[1, 1, 1, 1])
    w.case("average_pool_dilations", [node], [("x", img)], [], "rel", 1e-6, opset=19)
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear")
    w.case("resize_linear_opset19", [node], [("x", img)],
           [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")], "rel", 1e-6, opset=19)
    node = helper.make_node("Cast", ["x"], ["y"], to=TP.INT32, saturate=1)
    w.case("cast_saturate_opset19", [node], [("x", (x * 10))], [], "exact", opset=19, ydt=TP.INT32)
    node = helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")
    w.case("gelu_opset20", [node], [("x", x)], [], "rel", 1e-6, opset=20)
    chain = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "ax0"], ["u"]),
             helper.make_node("Squeeze", ["u", "ax0"], ["s"]),
             helper.make_node("Flatten", ["s"], ["f"], axis=1),
             helper.make_node("Identity", ["f"], ["y"])]
    w.case("shape_ops_opset21", chain, [("x", x)], [numpy_helper.from_array(np.array([8, 15], np.int64), "shape"),
                                                    numpy_helper.from_array(np.array([0], np.int64), "ax0")], "exact")
    # Per-tensor QDQ around a Conv at opset 21 still runs as one int8 QLinearConv.
    xs = RNG.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)
    wc = RNG.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(np.float32(0.03), "xs"), numpy_helper.from_array(np.uint8(128), "xz"),
             numpy_helper.from_array(wc, "w"), numpy_helper.from_array(np.full(4, 0.01, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(4, np.int8), "wz"),
             numpy_helper.from_array(np.float32(0.1), "ys"), numpy_helper.from_array(np.uint8(100), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"])]
    w.case("qdq_conv_per_channel_opset21", nodes, [("x", xs)], inits, "units", tol=0.1 * 1.0001, int8_ops=1)


def matmul_nbits_refusals(w):
    """ONNX Runtime's MatMulNBits the runtime refuses when it loads the file: each
    message names the node."""
    x = RNG.normal(0, 1, (2, 64)).astype(np.float32)
    K, N = 64, 8

    def nbits(name, inputs, domain="com.microsoft", **attrs):
        a = dict(K=K, N=N, bits=4, block_size=32)
        a.update(attrs)
        return helper.make_node("MatMulNBits", inputs, ["y"], name=name, domain=domain, **a)

    B = numpy_helper.from_array(np.zeros((N, 2, 16), np.uint8), "B")
    S = numpy_helper.from_array(np.ones((N, 2), np.float32), "S")
    w.refuses("matmul_nbits_default_domain", [nbits("mn", ["x", "B", "S"], domain="")], [("x", x)], [B, S],
              "node 'mn' (MatMulNBits) is com.microsoft's")
    w.refuses("matmul_nbits_g_idx", [nbits("mg", ["x", "B", "S", "", "g"])], [("x", x)],
              [B, S, numpy_helper.from_array(np.zeros(K, np.int32), "g")], "MatMulNBits 'mg': g_idx")
    w.refuses("matmul_nbits_block_24", [nbits("mb", ["x", "B", "S"], block_size=24)], [("x", x)], [B, S],
              "MatMulNBits 'mb': block_size 24 must be a power of two >= 16")
    w.refuses("matmul_nbits_b_size", [nbits("ms", ["x", "B", "S"], N=9)], [("x", x)], [B, S],
              "MatMulNBits 'ms': B must be uint8 [N, blocks, blob] = [9, 2, 16]")
    w.refuses("matmul_nbits_float_zero_points", [nbits("mz", ["x", "B", "S", "Z"])], [("x", x)],
              [B, S, numpy_helper.from_array(np.full((N, 2), 8, np.float32), "Z")], "MatMulNBits 'mz': zero points must be packed uint8")
    w.refuses("matmul_nbits_b_computed", [helper.make_node("Identity", ["B"], ["Bc"]), helper.make_node("Relu", ["S"], ["Sc"]),
                                           nbits("mc", ["x", "B", "Sc"])], [("x", x)], [B, S],
              "MatMulNBits 'mc': its scales 'Sc' is computed at run time")


def refusal_cases(w):
    """Semantics the runtime does not implement, and malformed block-wise models."""
    img = RNG.normal(0, 1, (1, 2, 6, 6)).astype(np.float32)
    sc = numpy_helper.from_array(np.array([1, 1, 0.5, 0.5], np.float32), "sc")
    w.refuses("resize_antialias", [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear", antialias=1, name="rs")],
              [("x", img)], [sc], "Resize 'rs': antialias", opset=18)
    sizes = numpy_helper.from_array(np.array([1, 2, 3, 4], np.int64), "sz")
    w.refuses("resize_keep_aspect", [helper.make_node("Resize", ["x", "", "", "sz"], ["y"], keep_aspect_ratio_policy="not_larger", name="rk")],
              [("x", img)], [sizes], "Resize 'rk': keep_aspect_ratio_policy", opset=18)
    w.refuses("pad_wrap", [helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap", name="pw")], [("x", img)],
              [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "p")], "Pad 'pw': Pad mode 'wrap'", opset=19)
    x = codes(TP.INT4, (5, 40))
    bad = [tensor("w", TP.INT4, x), numpy_helper.from_array(np.ones((5, 2), np.float32), "w_s")]
    w.refuses("dq_blocked_bad_scale_shape", [helper.make_node("DequantizeLinear", ["w", "w_s"], ["y"], axis=1, block_size=16, name="dqb")],
              [], bad, "DequantizeLinear 'dqb': block_size 16 along axis 1 of input [5, 40] needs a scale of shape [5, 3]")
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], output_dtype=TP.INT8, name="qm")
    w.refuses("q_output_dtype_mismatch", [q], [("x", img)], [numpy_helper.from_array(np.float32(0.1), "s"),
                                                              tensor("z", TP.INT4, np.int8(0))], "QuantizeLinear 'qm' has output_dtype 3")
    w.refuses("opset22", [helper.make_node("Relu", ["x"], ["y"])], [("x", img)], [], "ONNX opset 22 is not supported (13 to 21)",
              opset=22)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    w = Writer(out)
    blocked_dequantize_cases(w)
    narrow_type_cases(w)
    weight_only_cases(w)
    int8_activation_cases(w)
    opset18_cases(w)
    refusal_cases(w)
    matmul_nbits_refusals(w)
    w.finish()
    print("opset21_cases: %d models in %s" % (len(w.lines), out))


if __name__ == "__main__":
    main()
