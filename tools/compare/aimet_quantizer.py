"""qfx against Qualcomm AIMET's post-training quantization on the same float ONNX models.

    tools/compare/aimet_quantizer.py [--out DIR] [--quick] [MODEL ...]

For each model: the float ONNX file, calibration and evaluation samples of
tools/compare/ort_quantizer.py (its export and data helpers, imported). Then
- aimet_onnx's QuantizationSimModel with its default config (int8 weights,
  symmetric and per channel on Conv / Gemm / MatMul, int8 asymmetric activations,
  float bias), compute_encodings on the calibration samples (batches of 64), timed:
  with its default range scheme (min_max), with tf_enhanced (its histogram / SQNR
  scheme), and with tf_enhanced after its cross-layer equalization (CLE);
  the simulated model (sim.session, ONNX Runtime with AIMET's quantize-dequantize
  ops) runs the evaluation samples; the default's QDQ export (to_onnx_qdq, int8
  weights and int32 bias) also runs on ONNX Runtime as deployed (its int8 kernels);
- `qfx ptq` on the same file and samples, as ort_quantizer.py runs it (its
  qfx_quantize: MSE, range search, range search plus bias correction), the int8
  model run by ONNX Runtime; then MSE, and range search plus bias correction,
  with 8-bit weights (`--set qconfig.global.weight.bits=8`; the onednn target's
  native width is 7 bits on CPUs without VNNI), run by ONNX Runtime with graph
  optimizations off: Q/DQ computed in float, a simulation as AIMET's;
- top-1 against the labels where there are labels, cosine against the float
  model's outputs (ONNX Runtime, fp32) always; and ort_quantizer.py's verdict of
  whether qfx's best row is at least as accurate as AIMET's best.
Prints one markdown table in docs/compare.md's format. Needs a build (build/tools/qfx
or $QFX) and the .venv with aimet-onnx. Models: fashion_resnet, fashion_mobilenet
(default), resnet18, mobilenet_v2 (ort_quantizer.py's random-weight torchvision models).
"""
import argparse
import logging
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_quantizer as oq  # noqa: E402  (the shared export, data, metric and qfx helpers)

AIMET_ROWS = (("min_max", False), ("tf_enhanced", False), ("tf_enhanced", True))
QFX_8BIT = ("qconfig.global.weight.bits=8", "evaluation.num_samples=256")  # qfx's own evaluation: a few images (slow kernels)


def quiet_aimet():
    """Import aimet_onnx and keep its loggers to errors (it logs each adjusted weight scale)."""
    import aimet_onnx  # noqa: F401  (configures its loggers on import)
    from aimet_onnx.common.utils import AimetLogger
    AimetLogger.set_level_for_all_areas(logging.ERROR)
    warnings.filterwarnings("ignore")


def batches(x, size):
    """The model's input feeds, `size` samples at a time, as dicts by input name."""
    f = oq.feeds(x["path"], x["data"])
    return [{k: v[i:i + size] for k, v in f.items()} for i in range(0, oq.count(x["data"]), size)]


def aimet_quantize(src, cal, scheme, cle, tmp):
    """AIMET's simulated int8 model of `src`: QuantizationSimModel with the default
    config and `scheme`, after cross-layer equalization if `cle`; compute_encodings
    on the calibration samples. Returns (sim, compute_encodings seconds, CLE seconds)."""
    import onnx
    from aimet_onnx.quantsim import QuantizationSimModel
    from aimet_onnx.cross_layer_equalization import equalize_model
    model = onnx.load(src)
    cle_s = 0.0
    if cle:
        t0 = time.perf_counter()
        equalize_model(model)  # in place: folds batch norms, ReLU6 to ReLU between convs, scales, high-bias fold
        cle_s = time.perf_counter() - t0
    sim = QuantizationSimModel(model, param_type="int8", activation_type="int8", quant_scheme=scheme,
                               path=tmp, session_options_kwargs={"intra_op_num_threads": 2})
    feeds = batches({"path": src, "data": cal}, 64)
    t0 = time.perf_counter()
    sim.compute_encodings(feeds)
    return sim, time.perf_counter() - t0, cle_s


def sim_run(sim, src, x, batch=256):
    """The simulated model's first output on the samples `x`, `batch` at a time."""
    return np.concatenate([sim.session.run(None, f)[0] for f in batches({"path": src, "data": x}, batch)])


def aimet_qdq(sim, path):
    """Write the simulated model's QDQ export (int8 weights, int32 bias) to `path`;
    returns the seconds to_onnx_qdq took."""
    import onnx
    t0 = time.perf_counter()
    model = sim.to_onnx_qdq(export_int32_bias=True, prequantize_constants=True)
    secs = time.perf_counter() - t0
    onnx.save(model, path)
    return secs


def run_unfused(path, x, batch=256):
    """ONNX Runtime's first output with graph optimizations off: every QuantizeLinear,
    DequantizeLinear and float op runs as written (no fused int8 kernels)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    f = oq.feeds(path, x)
    return np.concatenate([s.run(None, {k: v[i:i + batch] for k, v in f.items()})[0] for i in range(0, oq.count(x), batch)])


def qfx_with(qfx, out, sets):
    """A qfx executable for oq.qfx_quantize that adds `--set` overrides to each call:
    a shell script in `out` that runs `qfx ARGS --set S ...`."""
    path = os.path.join(out, "qfx_set.sh")
    with open(path, "w") as f:
        f.write('#!/bin/sh\nexec "%s" "$@"%s\n' % (qfx, "".join(" --set " + s for s in sets)))
    os.chmod(path, 0o755)
    return path


def save_npy(out, cal, ev, labels):
    """Write the samples as qfx's data sections read them: {cal, ev, labels} paths
    (a {input: path} dict for a model with several inputs; labels None without)."""
    paths = {}
    for k, x in (("cal", cal), ("ev", ev)):
        if isinstance(x, dict):
            paths[k] = {i: os.path.join(out, "%s_%s.npy" % (k, i)) for i in x}
            for i, a in x.items():
                np.save(paths[k][i], a)
        else:
            paths[k] = os.path.join(out, k + ".npy")
            np.save(paths[k], x)
    paths["labels"] = None
    if labels is not None and not isinstance(labels, oq.Lines):
        paths["labels"] = os.path.join(out, "labels.npy")
        np.save(paths["labels"], labels)
    return paths


def prepare(name, out, quick):
    """One model's float ONNX file in `out` (exported once), its calibration and evaluation
    samples (ort_quantizer.py's), their .npy paths and the float model's outputs on ONNX
    Runtime: (src, cal, ev, labels, paths, ref)."""
    os.makedirs(out, exist_ok=True)
    src = os.path.join(out, name + ".onnx")
    if not os.path.exists(src):
        oq.export_model(name, src)
    cal, ev, labels = oq.data_for(name, quick, out)
    paths = save_npy(out, cal, ev, labels)
    return src, cal, ev, labels, paths, oq.run(src, ev)


def qfx_table_rows(qfx, name, src, out, cal, ev, labels, paths, ref):
    """qfx's rows for one model: ort_quantizer.py's settings run by ONNX Runtime, then MSE
    and range search plus bias correction with 8-bit weights run with Q/DQ in float."""
    rows = []
    for what, rs, bc in oq.QFX_ROWS:
        q8, secs = oq.qfx_quantize(qfx, src, out, paths["cal"], oq.count(cal), paths["ev"], paths["labels"], rs, bc,
                                   oq.INPUT_SHAPES.get(name))
        rows.append(("qfx (histogram, %s)" % what, secs) + oq.metrics(oq.run(q8, ev), ref, labels, out))
    for what, rs, bc in (oq.QFX_ROWS[0], oq.QFX_ROWS[-1]):
        q8, secs = oq.qfx_quantize(qfx_with(qfx, out, QFX_8BIT), src, out, paths["cal"], oq.count(cal), paths["ev"],
                                   paths["labels"], rs, bc, oq.INPUT_SHAPES.get(name))
        rows.append(("qfx (histogram, %s, 8-bit weights), Q/DQ in float" % what, secs)
                    + oq.metrics(run_unfused(q8, ev), ref, labels, out))
    return rows


def compare(name, out, qfx, quick):
    """One model: (calibration count, evaluation count, AIMET rows, qfx rows, CLE
    seconds); a row is (quantizer, seconds, cosine, top-1 or None, per-image hits)."""
    src, cal, ev, labels, paths, ref = prepare(name, out, quick)
    aimet_rows, cle_s = [], 0.0
    for scheme, cle in AIMET_ROWS:
        sim, secs, c = aimet_quantize(src, cal, scheme, cle, os.path.join(out, "aimet"))
        cle_s = max(cle_s, c)
        what = "AIMET %s%s" % ("CLE, " if cle else "", scheme + (" (default)" if scheme == "min_max" else ""))
        aimet_rows.append((what, secs) + oq.metrics(sim_run(sim, src, ev), ref, labels, out))
        if scheme == "min_max":
            qdq = os.path.join(out, "aimet_qdq.onnx")
            export_s = aimet_qdq(sim, qdq)
            qdq_row = (what + ", QDQ export on ONNX Runtime", secs + export_s) + oq.metrics(oq.run(qdq, ev), ref, labels, out)
        del sim
    aimet_rows.append(qdq_row)
    return oq.count(cal), oq.count(ev), aimet_rows, qfx_table_rows(qfx, name, src, out, cal, ev, labels, paths, ref), cle_s


def main():
    """Print the table for the models named on the command line (default: the two Fashion-MNIST models)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(oq.ROOT, "build", "compare_aimet"))
    ap.add_argument("--quick", action="store_true", help="fewer samples (ort_quantizer.py's --quick sets)")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    qfx = oq.qfx_binary("aimet_quantizer.py")
    quiet_aimet()
    print("| model | calibration / eval samples | quantizer | quantize s | top-1 | cosine vs fp32 |")
    print("|---|---|---|---:|---:|---:|")
    for name in a.models or ["fashion_resnet", "fashion_mobilenet"]:
        n_cal, n_ev, aimet_rows, qfx_rows, cle_s = compare(name, os.path.join(a.out, name), qfx, a.quick)
        for r in aimet_rows + qfx_rows:
            top1 = "%.2f%%" % (100 * r[3]) if r[3] is not None else "-"
            print("| %s | %d / %d | %s | %.2f | %s | %.5f |" % (name, n_cal, n_ev, r[0], r[1], top1, r[2]))
        _, words = oq.verdict(aimet_rows, qfx_rows)  # every row: AIMET's simulation, qfx's deployable and 8-bit rows
        speed = aimet_rows[1][1] / qfx_rows[0][1]  # histogram calibration: AIMET tf_enhanced vs qfx MSE
        print("| %s | | qfx vs best AIMET: %s; qfx's histogram calibration %.1fx faster than AIMET's tf_enhanced "
              "compute_encodings; AIMET's CLE took %.2f s more | | | |" % (name, words, speed, cle_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
