"""qfx against Google's litert-torch (formerly ai-edge-torch): an int8 .tflite from each.

    python tools/compare/litert_torch_quantizer.py [--out DIR] [--quick] [--kernels K] [MODEL ...]

Run it with the Python of the separate venv that tools/compare/requirements-litert-torch.txt
describes (litert-torch 0.10.0 wants torch < 2.15, .venv has 2.15). For each model:
- the float nn.Module (fashion_resnet / fashion_mobilenet: tools/fixtures/train_fashion_mnist.py
  with the committed weights; resnet18 / mobilenet_v2: torchvision with random weights and live
  batch-norm statistics, built as tools/compare/ort_quantizer.py builds them), one set of
  calibration samples and one of evaluation samples;
- litert-torch as its documentation shows it: torch.export (dynamic batch), prepare_pt2e with
  its PT2EQuantizer and get_symmetric_quantization_config (per channel, and its default per
  tensor), the calibration samples in batches of 64, convert_pt2e(fold_quantize=False), then
  litert_torch.convert(..., quant_config=QuantConfig(pt2e_quantizer=...)) at batch 1 and
  export to .tflite; timed: the calibration batches, and the whole (export to .tflite written);
- `qfx ptq --set backend=tflite_like --set 'output.formats=[onnx, tflite]'` with qconfig of
  configs/ptq/default.yaml (histogram observers with the MSE range search, per-channel min/max
  weights) on the same calibration samples (a .npy), and the same with `ptq.range_search` and
  bias correction; timed: its calibration stage (report.json), and the whole `qfx ptq` process
  (its evaluation cut to 64 samples);
- every .tflite run on LiteRT's interpreter (ai_edge_litert) with the same op resolver
  (--kernels builtin, the default: TFLite's built-in kernels without delegates) on the
  evaluation samples, float in and out: an int8 input is quantized here with the file's input
  scale and zero point (round half away from zero, as TFLite's QUANTIZE) and an int8 output
  dequantized; top-1 against the labels where there are labels, cosine against the float
  PyTorch model's outputs always, and the file's ops by the type of their output tensor.

Fashion-MNIST: calibrated on the 512 training images that configs/ptq/default.yaml draws (its
`calibration.seed: 0`, reproduced by qfx_draw below), evaluated on all 10,000 test images,
normalised as there: (x / 255 - 0.2860) / 0.3530. resnet18 / mobilenet_v2: 256 random N(0, 1)
samples to calibrate, 128 to evaluate (cosine only). --quick: 2,000 test images, 64 / 32.
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
import warnings
from collections import Counter

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "fixtures"))
from ort_quantizer import FASHION, idx, mcnemar_p, qfx_binary  # noqa: E402  (numpy only at import)

MEAN, STD = 0.2860, 0.3530


def qfx_draw(total, n, seed):
    """The sample indices qfx's seeded draw takes (quant/src/data/dataset.cpp, Dataset::select):
    a partial Fisher-Yates shuffle with std::mt19937_64(seed) and, for each step,
    std::uniform_int_distribution<int64_t>(i, total - 1) as libstdc++ computes it (Lemire's
    multiply-and-reject on the 64-bit output). Checked equal to that C++ on GCC 12."""
    mask = (1 << 64) - 1
    mt = [seed & mask] + [0] * 311
    for i in range(1, 312):
        mt[i] = (6364136223846793005 * (mt[i - 1] ^ (mt[i - 1] >> 62)) + i) & mask
    pos = [312]

    def rand64():
        if pos[0] >= 312:
            for i in range(312):
                x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
                mt[i] = mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            pos[0] = 0
        y = mt[pos[0]]
        pos[0] += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return (y ^ (y >> 43)) & mask

    index = list(range(total))
    for i in range(n if n < total else 0):  # qfx shuffles only when it takes fewer than all
        r = total - i
        p = rand64() * r
        if p & mask < r:
            threshold = ((1 << 64) - r) % r
            while p & mask < threshold:
                p = rand64() * r
        j = i + (p >> 64)
        index[i], index[j] = index[j], index[i]
    return index[:n]


def data_for(name, quick):
    if name.startswith("fashion_"):
        norm = lambda a: ((a.astype(np.float32) / 255.0 - MEAN) / STD)[:, None]
        train = idx(FASHION + "/train-images-idx3-ubyte.gz")
        n_eval = 2000 if quick else 10000
        test = idx(FASHION + "/t10k-images-idx3-ubyte.gz")[:n_eval]
        labels = idx(FASHION + "/t10k-labels-idx1-ubyte.gz")[:n_eval].astype(np.int64)
        return norm(train[qfx_draw(len(train), 512, 0)]), norm(test), labels
    rng = np.random.default_rng(1)
    n_cal, n_eval = (64, 32) if quick else (256, 128)
    return (rng.normal(0, 1, (n_cal, 3, 64, 64)).astype(np.float32),
            rng.normal(0, 1, (n_eval, 3, 64, 64)).astype(np.float32), None)


def float_model(name):
    """The float nn.Module, and the model file qfx reads for it (TorchScript of the same weights)."""
    import torch
    if name.startswith("fashion_"):
        import train_fashion_mnist as t
        state = os.path.join(ROOT, "tools", "fixtures", name + ".state.pt")
        m = t.make(state)
        m.load_state_dict(torch.load(state))
        fixtures = os.environ.get("QFX_FIXTURES", os.path.join(ROOT, "build", "fixtures"))
        return m.eval(), os.path.join(fixtures, name + ".pt")
    import torchvision
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None)
    m.train()  # live batch-norm statistics, as a trained model has (as ort_quantizer.py)
    with torch.no_grad():
        for _ in range(4):
            m(torch.randn(16, 3, 64, 64))
    return m.eval(), None


def litert_quantize(m, cal, path, per_channel):
    """litert-torch's documented PT2E flow; (calibration s, whole s)."""
    import torch
    import litert_torch
    from litert_torch.quantize import pt2e_quantizer as pq
    from litert_torch.quantize.quant_config import QuantConfig
    from torchao.quantization.pt2e import quantize_pt2e
    t0 = time.perf_counter()
    x = torch.from_numpy(cal)
    batch = torch.export.Dim("batch", min=1, max=4096)
    g = torch.export.export(m, (x[:2],), dynamic_shapes=({0: batch},)).module()
    quantizer = pq.PT2EQuantizer().set_global(pq.get_symmetric_quantization_config(is_per_channel=per_channel))
    with contextlib.redirect_stdout(io.StringIO()):  # its notes on ReLU partitions
        g = quantize_pt2e.prepare_pt2e(g, quantizer)
    t1 = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(x), 64):
            g(x[i:i + 64])
    t_cal = time.perf_counter() - t1
    g = quantize_pt2e.convert_pt2e(g, fold_quantize=False)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        em = litert_torch.convert(g, (x[:1],), quant_config=QuantConfig(pt2e_quantizer=quantizer))
        em.export(path)
    return t_cal, time.perf_counter() - t0


def qfx_quantize(qfx, model, out, cal_npy, n_cal, ev_npy, input_shape, range_search_bc):
    """`qfx ptq` for the tflite_like target; (path of model_int8.tflite, calibration s, whole s)."""
    cfg = os.path.join(out, "qfx.yaml")
    with open(cfg, "w") as f:
        f.write("model: {path: %s, input_shape: %s}\nbackend: tflite_like\n" % (model, input_shape))
        f.write("qconfig:\n  global:\n    activation: {observer: histogram, algorithm: mse}\n"
                "    weight: {observer: minmax, granularity: per_channel}\n")
        f.write("calibration: {data: {format: npy, images: %s}, num_samples: %d, batch_size: 64}\n" % (cal_npy, n_cal))
        f.write("evaluation: {data: {format: npy, images: %s}, num_samples: 64, metric: cosine, reference_check: 0, "
                "sqnr_samples: 0}\n" % ev_npy)
        f.write("ptq: {range_search: %s, bias_correction: %s}\n" % (("true", "true") if range_search_bc else ("false", "false")))
        f.write("output: {dir: %s, formats: [onnx, tflite], report_html: false}\n" % os.path.join(out, "qfx"))
    t0 = time.perf_counter()
    r = subprocess.run([qfx, "ptq", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    whole = time.perf_counter() - t0
    if r.returncode:
        errors = [ln for ln in r.stderr.splitlines() if "error" in ln.lower()] or r.stderr.splitlines()[-1:]
        raise RuntimeError("qfx ptq exit %d: %s" % (r.returncode, errors[-1].strip() if errors else ""))
    report = json.load(open(os.path.join(out, "qfx", "report.json")))
    return os.path.join(out, "qfx", "model_int8.tflite"), report["calibration"]["seconds"], whole


def interpreter(path, kernels):
    from ai_edge_litert import interpreter as litert
    kind = {"builtin": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            "reference": litert.OpResolverType.BUILTIN_REF, "default": litert.OpResolverType.AUTO}[kernels]
    return litert.Interpreter(model_path=path, experimental_op_resolver_type=kind)


def run_tflite(path, x, kernels):
    """Float outputs of the .tflite for float inputs x (NCHW): fed NCHW or NHWC as the file
    takes it; an int8 input quantized with the file's scale and zero point, an int8 output
    dequantized. In batches where the file's batch is dynamic, else one sample at a time."""
    it = interpreter(path, kernels)
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    if x.ndim == 4 and list(inp["shape"][1:]) != list(x.shape[1:]):
        x = np.transpose(x, (0, 2, 3, 1))
    if list(inp["shape"][1:]) != list(x.shape[1:]):
        raise RuntimeError("%s: input %s, samples %s" % (path, list(inp["shape"]), list(x.shape)))
    if inp["dtype"] == np.int8:
        s, z = inp["quantization"]
        v = x / s
        x = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) + z, -128, 127).astype(np.int8)
    batch = 500 if inp["shape_signature"][0] == -1 else 1
    ys = []
    for i in range(0, len(x), batch):
        xb = np.ascontiguousarray(x[i:i + batch])
        if batch > 1:
            it.resize_tensor_input(inp["index"], list(xb.shape))
        if batch > 1 or i == 0:
            it.allocate_tensors()
        it.set_tensor(inp["index"], xb)
        it.invoke()
        ys.append(it.get_tensor(out["index"]).copy())
    y = np.concatenate(ys)
    if out["dtype"] == np.int8:
        s, z = out["quantization"]
        y = (y.astype(np.float32) - z) * s
    return y.astype(np.float32).reshape(len(y), -1), inp


def op_counts(path, kernels):
    """(int8 ops, float ops, QUANTIZE/DEQUANTIZE ops, 'OP xN, ...'), by each op's output type."""
    it = interpreter(path, kernels)
    it.allocate_tensors()
    dtype = {t["index"]: t["dtype"] for t in it.get_tensor_details()}
    kinds, names = Counter(), Counter()
    for op in it._get_ops_details():
        name = op["op_name"]
        names[name] += 1
        if name in ("QUANTIZE", "DEQUANTIZE"):
            kinds["q"] += 1
        elif dtype[op["outputs"][0]] == np.int8:
            kinds["int8"] += 1
        elif dtype[op["outputs"][0]] == np.float32:
            kinds["float"] += 1
        else:
            kinds["other"] += 1
    listing = ", ".join("%s x%d" % kv for kv in sorted(names.items()))
    return kinds["int8"], kinds["float"], kinds["q"], listing + (" (%d other)" % kinds["other"] if kinds["other"] else "")


def cosine(y, ref):
    return float((y.astype(np.float64) * ref).sum() / np.sqrt((y.astype(np.float64) ** 2).sum() * (ref.astype(np.float64) ** 2).sum()))


def compare(name, out, qfx, quick, kernels):
    import torch
    os.makedirs(out, exist_ok=True)
    cal, ev, labels = data_for(name, quick)
    m, model = float_model(name)
    with torch.no_grad():
        ref = np.concatenate([m(torch.from_numpy(ev[i:i + 500])).numpy() for i in range(0, len(ev), 500)])
    ref = ref.reshape(len(ref), -1)
    if model is None:  # torchvision: TorchScript of the same module for qfx
        model = os.path.join(out, name + ".pt")
        torch.jit.trace(m, torch.from_numpy(cal[:2])).save(model)
    cal_npy, ev_npy = os.path.join(out, "cal.npy"), os.path.join(out, "ev.npy")
    np.save(cal_npy, cal)
    np.save(ev_npy, ev)
    rows = [("float PyTorch model (fp32)", None, None, 1.0,
             float((ref.argmax(1) == labels).mean()) if labels is not None else None, None)]
    files = []
    for what, per_channel in (("per-channel weights", True), ("per-tensor weights (default)", False)):
        path = os.path.join(out, "litert_torch_%s.tflite" % ("per_channel" if per_channel else "per_tensor"))
        try:
            t_cal, whole = litert_quantize(m, cal, path, per_channel)
        except Exception as e:  # noqa: BLE001  (a failed conversion is a row, not the end of the run)
            path, t_cal, whole = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[-1][:300]), None, None
        files.append(("litert-torch PT2E, " + what, path, t_cal, whole))
    shape = "[-1, %s]" % ", ".join(str(d) for d in cal.shape[1:])
    for what, rs_bc in (("histogram, MSE", False), ("histogram, range search, bias correction", True)):
        sub = os.path.join(out, "qfx_rs_bc" if rs_bc else "qfx_mse")
        os.makedirs(sub, exist_ok=True)
        try:
            path, t_cal, whole = qfx_quantize(qfx, model, sub, cal_npy, len(cal), ev_npy, shape, rs_bc)
        except RuntimeError as e:
            path, t_cal, whole = str(e), None, None
        files.append(("qfx tflite_like (%s)" % what, path, t_cal, whole))
    hits = {}
    for what, path, t_cal, whole in files:
        if not path.endswith(".tflite"):  # it failed: the error in the ops column
            rows.append((what + ": failed", t_cal, whole, None, None, ("-", "-", "-", "-", path)))
            continue
        y, inp = run_tflite(path, ev, kernels)
        top1 = None
        if labels is not None:
            hits[what] = y.argmax(1) == labels
            top1 = float(hits[what].mean())
        n8, nf, nq, listing = op_counts(path, kernels)
        layout = "" if len(inp["shape"]) != 4 else " NCHW" if list(inp["shape"][1:]) == list(ev.shape[1:]) else " NHWC"
        io = np.dtype(inp["dtype"]).name + layout
        rows.append((what, t_cal, whole, cosine(y, ref), top1, (n8, nf, nq, io, listing)))
    return len(cal), len(ev), rows, hits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "compare", "litert_torch"))
    ap.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    ap.add_argument("--kernels", choices=("builtin", "reference", "default"), default="builtin",
                    help="LiteRT's op resolver for every file: builtin (without delegates), reference, default (XNNPACK)")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    qfx = qfx_binary("litert_torch_quantizer.py")
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(2)
    models = a.models or ["fashion_resnet", "fashion_mobilenet", "resnet18", "mobilenet_v2"]
    print("| model | calibration / eval samples | quantizer | calibration s | whole s | top-1 | cosine vs fp32 "
          "| TFLite ops: int8 / float / (de)quantize | input | ops |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|---|")
    for name in models:
        n_cal, n_ev, rows, hits = compare(name, os.path.join(a.out, name), qfx, a.quick, a.kernels)
        for what, t_cal, whole, cos, top1, ops in rows:
            f = lambda v, fmt: fmt % v if v is not None else "-"
            o = ops or ("", "", "", "", "")
            print("| %s | %d / %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, n_cal, n_ev, what, f(t_cal, "%.2f"), f(whole, "%.1f"), f(None if top1 is None else 100 * top1, "%.2f%%"),
                f(cos, "%.5f"), "%s / %s / %s" % o[:3] if ops else "", o[3], o[4]))
        if len([k for k in hits if k.startswith("litert")]) and len([k for k in hits if k.startswith("qfx")]):
            keys = list(hits)
            best = lambda who: max((k for k in keys if k.startswith(who)), key=lambda k: hits[k].mean())
            lt, qf = best("litert"), best("qfx")
            print("| %s | | McNemar, best litert-torch (%s) against best qfx (%s) top-1: p = %.2f | | | | | | | |"
                  % (name, lt, qf, mcnemar_p(hits[lt], hits[qf])))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
