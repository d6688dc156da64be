"""Weight-only INT4 matmuls (W4A16) on qfx's runtime against its fp32 matmuls and
ONNX Runtime's MatMulNBits, side by side in one run.

A stack of --layers float MatMuls [--dim x --dim] (a decoder layer's projections
have this shape) is quantized by ONNX Runtime's own MatMulNBitsQuantizer (4 bits,
symmetric, blocks of --block along K) into com.microsoft MatMulNBits. qfx's runtime
loads that file (MatMulNBits, packed kernel on the onednn backend) and the fp32
file; ONNX Runtime runs both, its MatMulNBits at accuracy_level 0 (float
activations, as qfx computes) and 4 (activations quantized to int8 per block).
For each row count (1 = one decode step at batch 1) the table gives the median
milliseconds of one forward, the ratio to qfx fp32, and the weight bytes read per
second against `qfx bench --peak`'s memory read bandwidth. Outputs are checked
against ONNX Runtime's at accuracy_level 0 (relative max difference).

    PYTHONPATH=build/python .venv/bin/python tools/bench/w4_matmul.py [--qfx build/tools/qfx]

Run from the repository root after `cmake --build build`, on an otherwise idle machine."""

import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

import qfx


def stack(dim, layers, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.normal(0, 1, (dim, dim)) / np.sqrt(dim)).astype(np.float32), f"w{i}"))
        y = "y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [y], name=f"linear{i}"))
        x = y
    g = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", dim])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", dim])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def nbits(m, block, level):
    q = MatMulNBitsQuantizer(copy.deepcopy(m), algo_config=DefaultWeightOnlyQuantConfig(
        block_size=block, is_symmetric=True, bits=4, accuracy_level=level))
    q.process()
    return q.model.model


def weight_bytes(m):
    return sum(t.ByteSize() for t in m.graph.initializer)


def median_ms(fn, reps):
    fn()
    fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(t))


def peak_read_gbs(qfx_cli):
    out = subprocess.run([qfx_cli, "bench", "--peak"], capture_output=True, text=True, check=True).stdout
    hit = re.search(r"memory read ([0-9.]+) GB/s", out)
    return float(hit.group(1)) if hit else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--rows", default="1,4,16")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--qfx", default="build/tools/qfx", help="the qfx CLI, for --peak")
    a = ap.parse_args()
    fp32 = stack(a.dim, a.layers)
    w4 = {lvl: nbits(fp32, a.block, lvl) for lvl in (0, 4)}
    tmp = tempfile.mkdtemp()
    paths = {"fp32": os.path.join(tmp, "fp32.onnx"), 0: os.path.join(tmp, "w4_l0.onnx"), 4: os.path.join(tmp, "w4_l4.onnx")}
    onnx.save(fp32, paths["fp32"])
    for lvl in (0, 4):
        onnx.save(w4[lvl], paths[lvl])
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    sess = {k: ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]) for k, p in paths.items()}
    mine = {"fp32": qfx.runtime.Model(paths["fp32"]), "w4": qfx.runtime.Model(paths[0])}
    bytes_ = {"fp32": weight_bytes(fp32), "w4": weight_bytes(w4[0])}
    peak = peak_read_gbs(a.qfx)
    print(f"# {a.layers} MatMuls {a.dim}x{a.dim}, 4-bit symmetric blocks of {a.block} (ONNX Runtime's MatMulNBitsQuantizer); "
          f"weights fp32 {bytes_['fp32'] / 1e6:.1f} MB, W4 {bytes_['w4'] / 1e6:.1f} MB; {a.threads} threads; "
          f"onnxruntime {ort.__version__}; qfx bench --peak read {peak} GB/s")
    print("| rows | runtime, weights | ms | vs qfx fp32 | weight GB/s | of peak read |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(1)
    for rows in [int(r) for r in a.rows.split(",")]:
        x = rng.normal(0, 1, (rows, a.dim)).astype(np.float32)
        ref = sess[0].run(None, {"x": x})[0]
        got = mine["w4"].run(x)["y"]
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        runs = [("qfx fp32", lambda: mine["fp32"].run(x), "fp32"),
                ("qfx W4 (MatMulNBits)", lambda: mine["w4"].run(x), "w4"),
                ("ONNX Runtime fp32", lambda: sess["fp32"].run(None, {"x": x}), "fp32"),
                ("ONNX Runtime MatMulNBits, accuracy_level 0", lambda: sess[0].run(None, {"x": x}), "w4"),
                ("ONNX Runtime MatMulNBits, accuracy_level 4 (int8 activations)", lambda: sess[4].run(None, {"x": x}), "w4")]
        ms = {name: median_ms(fn, a.reps) for name, fn, _ in runs}
        base = ms["qfx fp32"]
        for name, _, w in runs:
            gbs = bytes_[w] / (ms[name] / 1e3) / 1e9
            print(f"| {rows} | {name} | {ms[name]:.3f} | {base / ms[name]:.2f}x | {gbs:.1f} | {100 * gbs / peak:.0f} % |")
        print(f"| {rows} | qfx W4 vs ONNX Runtime (accuracy_level 0): relative max difference {err:.1e} | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
