"""Block-wise INT4 matmuls on qfx's runtime against its fp32 matmuls and ONNX
Runtime's MatMulNBits, side by side in one run.

A stack of --layers float MatMuls [--dim x --dim] (a decoder layer's projections
have this shape; the default's 4-bit weights, 67 MB, exceed the last-level cache of
the machines qfx is measured on, so each forward reads them from memory, as a decode
step of a real decoder does) is quantized by ONNX Runtime's own MatMulNBitsQuantizer
(4 bits, symmetric, blocks of --block along K) into com.microsoft MatMulNBits, once
with accuracy_level 0 (float activations: W4A16) and once with 4 (activations
quantized to int8 per block: W4A8). qfx's runtime (onednn backend) and ONNX Runtime
run the fp32 file and both MatMulNBits files. For each row count (1 = one decode
step at batch 1) the table gives the fastest of --reps forwards (in three rounds, each
runner's calls back to back within a round: both runtimes keep their threads spinning
for a while after a call, which would take the cores from a runner called right after
another), the speed-up over qfx fp32,
and the weight bytes read per second against `qfx bench --peak`'s memory read
bandwidth. qfx's outputs are checked against ONNX Runtime's on the same file
(relative max difference).

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


def fastest_ms(runs, reps, rounds=3):
    """The fastest call of each runner: `rounds` rounds, each runner called
    reps / rounds times in a row within a round (its first call of a round not
    counted)."""
    best = {name: float("inf") for name, _, _ in runs}
    for _ in range(rounds):
        for name, fn, _ in runs:
            fn()
            for _ in range(max(1, reps // rounds)):
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
    return {name: 1e3 * t for name, t in best.items()}


def peak_read_gbs(qfx_cli):
    out = subprocess.run([qfx_cli, "bench", "--peak"], capture_output=True, text=True, check=True).stdout
    hit = re.search(r"memory read ([0-9.]+) GB/s", out)
    return float(hit.group(1)) if hit else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--rows", default="1,4,16")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--qfx", default="build/tools/qfx", help="the qfx CLI, for --peak")
    a = ap.parse_args()
    fp32 = stack(a.dim, a.layers)
    tmp = tempfile.mkdtemp()
    paths = {"fp32": os.path.join(tmp, "fp32.onnx"), "w4a16": os.path.join(tmp, "w4a16.onnx"), "w4a8": os.path.join(tmp, "w4a8.onnx")}
    bytes_ = {"fp32": weight_bytes(fp32)}
    for key, level in (("w4a16", 0), ("w4a8", 4)):
        q = nbits(fp32, a.block, level)
        bytes_[key] = weight_bytes(q)
        onnx.save(q, paths[key])
        del q
    onnx.save(fp32, paths["fp32"], save_as_external_data=True, location="fp32.onnx.data")  # over 2 GB at larger --dim
    del fp32
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    sess = {k: ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]) for k, p in paths.items()}
    mine = {k: qfx.runtime.Model(p) for k, p in paths.items()}
    peak = peak_read_gbs(a.qfx)
    print(f"# {a.layers} MatMuls {a.dim}x{a.dim}, 4-bit symmetric blocks of {a.block} (ONNX Runtime's MatMulNBitsQuantizer); "
          f"weights fp32 {bytes_['fp32'] / 1e6:.0f} MB, 4-bit {bytes_['w4a16'] / 1e6:.0f} MB; {a.threads} threads; "
          f"onnxruntime {ort.__version__}; qfx bench --peak read {peak} GB/s")
    print("| rows | runtime, weights | ms | vs qfx fp32 | weight GB/s | of peak read |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(1)
    for rows in [int(r) for r in a.rows.split(",")]:
        x = rng.normal(0, 1, (rows, a.dim)).astype(np.float32)
        errs = {}
        for k in ("w4a16", "w4a8"):
            ref, got = sess[k].run(None, {"x": x})[0], mine[k].run(x)["y"]
            errs[k] = float(np.abs(got - ref).max() / np.abs(ref).max())
        runs = [("qfx fp32", lambda: mine["fp32"].run(x), "fp32"),
                ("qfx MatMulNBits W4A16 (accuracy_level 0)", lambda: mine["w4a16"].run(x), "w4a16"),
                ("qfx MatMulNBits W4A8 (accuracy_level 4)", lambda: mine["w4a8"].run(x), "w4a8"),
                ("ONNX Runtime fp32", lambda: sess["fp32"].run(None, {"x": x}), "fp32"),
                ("ONNX Runtime MatMulNBits W4A16 (accuracy_level 0)", lambda: sess["w4a16"].run(None, {"x": x}), "w4a16"),
                ("ONNX Runtime MatMulNBits W4A8 (accuracy_level 4)", lambda: sess["w4a8"].run(None, {"x": x}), "w4a8")]
        ms = fastest_ms(runs, a.reps)
        base = ms["qfx fp32"]
        for name, _, w in runs:
            gbs = bytes_[w] / (ms[name] / 1e3) / 1e9
            print(f"| {rows} | {name} | {ms[name]:.2f} | {base / ms[name]:.2f}x | {gbs:.1f} | {100 * gbs / peak:.0f} % |")
        print(f"| {rows} | qfx vs ONNX Runtime, relative max difference: W4A16 {errs['w4a16']:.1e}, W4A8 {errs['w4a8']:.1e} | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
