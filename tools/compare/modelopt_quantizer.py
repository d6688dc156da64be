"""qfx against NVIDIA ModelOpt's ONNX post-training quantization on the same float ONNX models.

    tools/compare/modelopt_quantizer.py [--out DIR] [--quick] [MODEL ...]

For each model: the float ONNX file, calibration and evaluation samples of
tools/compare/ort_quantizer.py (its export and data helpers, imported). Then
- modelopt.onnx.quantization.quantize in int8 mode (its TensorRT-oriented Q/DQ
  placement: per-channel symmetric int8 weights and symmetric int8 activations on
  the inputs of the ops it quantizes, no output quantization, float bias),
  calibrated on ONNX Runtime's CPU provider (calibration_eps=["cpu"]) with the
  calibration samples in batches of 64, timed (the whole call: its graph
  pre-processing, calibration, Q/DQ insertion and save): with its calibration
  methods 'max' and 'entropy' (its default), the rest of the model left in fp32
  (high_precision_dtype="fp32"); then 'entropy' with its default fp16 for the
  rest of the model;
- every ModelOpt model run by ONNX Runtime (CPU) as written, and with graph
  optimizations off (Q/DQ computed in float: a simulation, as aimet_quantizer.py
  runs its 8-bit rows);
- `qfx ptq` on the same file and samples exactly as aimet_quantizer.py runs it
  (ort_quantizer.py's qfx_quantize: MSE, range search, range search plus bias
  correction, run by ONNX Runtime; then MSE, and range search plus bias
  correction, with 8-bit weights, run with graph optimizations off: the onednn
  target's weights are 7 bits wide on CPUs without VNNI, and ONNX Runtime's fused
  int8 kernels lose accuracy with 8-bit weights there);
- top-1 against the labels where there are labels, cosine against the float
  model's outputs (ONNX Runtime, fp32) always; and ort_quantizer.py's verdict of
  whether qfx's best row is at least as accurate as ModelOpt's best.
Prints one markdown table in docs/compare.md's format. Needs a build (build/tools/qfx
or $QFX) and a separate venv with nvidia-modelopt that sees .venv's packages
(tools/compare/requirements-modelopt.txt says how; ModelOpt's [onnx] extra would
replace .venv's onnx and onnxruntime). ModelOpt's logs go to OUT/MODEL/modelopt_*.log.
Models: fashion_resnet, fashion_mobilenet (default), resnet18, mobilenet_v2
(ort_quantizer.py's random-weight torchvision models).
"""
import argparse
import collections
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_quantizer as oq  # noqa: E402  (the shared export, data, metric and qfx helpers)
import aimet_quantizer as aq  # noqa: E402  (its unfused run, --set wrapper and .npy writer; aimet_onnx is not imported)

# (calibration method, precision of the ops it leaves unquantized)
MODELOPT_ROWS = (("max", "fp32"), ("entropy", "fp32"), ("entropy", "fp16"))
WEIGHTED = ("Conv", "ConvTranspose", "Gemm", "MatMul")


@contextlib.contextmanager
def output_to(path):
    """Send this process's stdout and stderr (file descriptors 1 and 2: ModelOpt's
    logger, ONNX Runtime's calibration progress bars) to `path` for the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "a") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def modelopt_quantize(src, dst, cal, method, high_precision, log):
    """ModelOpt's int8 PTQ of `src` into `dst`: calibration `method` on ONNX Runtime's
    CPU provider, the calibration samples 64 at a time; returns the call's seconds."""
    from modelopt.onnx.quantization import quantize
    f = oq.feeds(src, cal)
    shapes = ",".join("%s:%s" % (k, "x".join(str(d) for d in (min(64, len(v)),) + v.shape[1:])) for k, v in f.items())
    data = f if len(f) > 1 else next(iter(f.values()))
    with output_to(log):
        t0 = time.perf_counter()
        quantize(src, quantize_mode="int8", calibration_data=data, calibration_method=method, calibration_shapes=shapes,
                 calibration_eps=["cpu"], high_precision_dtype=high_precision, output_path=dst, log_level="INFO")
        return time.perf_counter() - t0


def float_ops(path):
    """The weighted ops (Conv, Gemm, MatMul) of the ONNX model at `path` that take no
    dequantized input, i.e. that ModelOpt's placement leaves in float: {op: count}
    and the number of weighted ops."""
    import onnx
    g = onnx.load(path).graph
    dq = {o for n in g.node if n.op_type == "DequantizeLinear" for o in n.output}
    weighted = [n for n in g.node if n.op_type in WEIGHTED]
    return collections.Counter(n.op_type for n in weighted if not any(i in dq for i in n.input)), len(weighted)


def compare(name, out, qfx, quick):
    """One model: (calibration count, evaluation count, ModelOpt rows, qfx rows, the
    weighted ops ModelOpt leaves in float); a row is (quantizer, seconds, cosine,
    top-1 or None, per-image hits)."""
    src, cal, ev, labels, paths, ref = aq.prepare(name, out, quick)
    mo_rows, in_float = [], None
    for method, hp in MODELOPT_ROWS:
        tag = "%s_%s" % (method, hp)
        dst = os.path.join(out, "modelopt_%s.onnx" % tag)
        log = os.path.join(out, "modelopt_%s.log" % tag)
        if os.path.exists(log):
            os.remove(log)
        secs = modelopt_quantize(src, dst, cal, method, hp, log)
        what = "ModelOpt %s%s" % (method, " (default)" if hp == "fp32" and method == "entropy" else
                                  ", fp16 elsewhere (default)" if hp == "fp16" else "")
        mo_rows.append((what + ", on ONNX Runtime", secs) + oq.metrics(oq.run(dst, ev), ref, labels, out))
        mo_rows.append((what + ", Q/DQ in float", secs) + oq.metrics(aq.run_unfused(dst, ev), ref, labels, out))
        if hp == "fp32":
            in_float = float_ops(dst)
    qfx_rows = aq.qfx_table_rows(qfx, name, src, out, cal, ev, labels, paths, ref)
    return oq.count(cal), oq.count(ev), mo_rows, qfx_rows, in_float


def main():
    """Print the table for the models named on the command line (default: the two Fashion-MNIST models)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(oq.ROOT, "build", "compare_modelopt"))
    ap.add_argument("--quick", action="store_true", help="fewer samples (ort_quantizer.py's --quick sets)")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    qfx = oq.qfx_binary("modelopt_quantizer.py")
    try:
        import modelopt.onnx.quantization  # noqa: F401
    except ImportError as e:
        sys.exit("modelopt_quantizer.py: %s: run it from the venv of tools/compare/requirements-modelopt.txt" % e)
    print("| model | calibration / eval samples | quantizer | quantize s | top-1 | cosine vs fp32 |")
    print("|---|---|---|---:|---:|---:|")
    for name in a.models or ["fashion_resnet", "fashion_mobilenet"]:
        n_cal, n_ev, mo_rows, qfx_rows, (in_float, n_weighted) = compare(name, os.path.join(a.out, name), qfx, a.quick)
        for r in mo_rows + qfx_rows:
            top1 = "%.2f%%" % (100 * r[3]) if r[3] is not None else "-"
            print("| %s | %d / %d | %s | %.2f | %s | %.5f |" % (name, n_cal, n_ev, r[0], r[1], top1, r[2]), flush=True)
        _, words = oq.verdict(mo_rows, qfx_rows)  # every row: ModelOpt's as run and simulated, qfx's deployable and 8-bit rows
        speed = mo_rows[2][1] / qfx_rows[0][1], mo_rows[0][1] / qfx_rows[0][1]  # ModelOpt entropy (max) vs qfx MSE
        left = ", ".join("%d %s" % (n, op) for op, n in sorted(in_float.items())) or "none"
        print("| %s | | qfx vs best ModelOpt: %s; qfx's histogram calibration %.1fx (%.1fx) faster than ModelOpt's entropy (max) "
              "quantize call; weighted ops ModelOpt leaves in float: %s of %d | | | |"
              % (name, words, speed[0], speed[1], left, n_weighted), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
