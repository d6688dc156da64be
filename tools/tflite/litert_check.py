"""Runs a .tflite on LiteRT's interpreter and compares its outputs with qfx's.

Usage: litert_check.py MODEL.tflite INPUT.npy QFX_OUTPUT.npy [--kernels builtin|reference|default]

INPUT.npy is what `qfx run` took (NCHW for 4-D); it is fed to LiteRT as NHWC. A
model with int8 inputs and outputs (`output.tflite_io: int8`) gets the input
quantized with its input tensor's qparams as ONNX's QuantizeLinear does (round half
to even), and its int8 outputs are dequantized as DequantizeLinear does.
QFX_OUTPUT.npy is qfx's output for it (`qfx run MODEL_int8.onnx -i INPUT.npy -o ...`).
Both outputs are dequantized int8 codes (scale * (q - zero_point)), so equal floats
are equal codes. Prints one line per output: how many samples are identical, and
the largest difference in codes; exits 1 unless every value is identical.

--kernels: builtin (default): TFLite's built-in kernels without delegates (the
int8 kernels LiteRT runs where no accelerator delegate applies); reference:
TFLite's reference kernels; default: LiteRT's default op resolver (XNNPACK
delegate applied).
"""
import argparse
import sys

import numpy as np
from ai_edge_litert import interpreter as litert

RESOLVERS = {
    "builtin": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    "reference": litert.OpResolverType.BUILTIN_REF,
    "default": litert.OpResolverType.AUTO,
}


def run_litert(path, x, kernels):
    it = litert.Interpreter(model_path=path, experimental_op_resolver_type=RESOLVERS[kernels])
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    xs = np.transpose(x, (0, 2, 3, 1)) if x.ndim == 4 else x
    xs = xs.astype(np.float32)
    if inp["dtype"] == np.int8:
        s, zp = inp["quantization"]
        xs = np.clip(np.round(xs / np.float32(s)) + zp, -128, 127).astype(np.int8)
    it.resize_tensor_input(inp["index"], list(xs.shape))
    it.allocate_tensors()
    it.set_tensor(inp["index"], np.ascontiguousarray(xs))
    it.invoke()
    y = it.get_tensor(out["index"])
    if out["dtype"] == np.int8:
        s, zp = out["quantization"]
        y = (y.astype(np.int32) - zp).astype(np.float32) * np.float32(s)
    return np.transpose(y, (0, 3, 1, 2)) if y.ndim == 4 else y, it


def code_step(v):
    """The step between neighbouring dequantized codes in `v` (its scale), or 1."""
    u = np.unique(v)
    d = np.diff(u)
    return float(d[d > 0].min()) if d.size and (d > 0).any() else 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("qfx_output")
    ap.add_argument("--kernels", choices=sorted(RESOLVERS), default="builtin")
    a = ap.parse_args()
    x, ref = np.load(a.input), np.load(a.qfx_output)
    y, _ = run_litert(a.model, x, a.kernels)
    if y.shape != ref.shape:
        print(f"shapes differ: LiteRT {y.shape}, qfx {ref.shape}")
        return 1
    scale = code_step(ref)
    same = np.all((y == ref).reshape(len(y), -1), axis=1)
    codes = float(np.abs(y.astype(np.float64) - ref).max() / scale)
    print(f"LiteRT ({a.kernels} kernels) vs qfx: {int(same.sum())} of {len(same)} samples identical, "
          f"{int((y != ref).sum())} of {y.size} values differ, largest difference {codes:.0f} code(s)")
    return 0 if same.all() else 1


if __name__ == "__main__":
    sys.exit(main())
