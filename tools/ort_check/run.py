"""Runs an ONNX model with ONNX Runtime (CPU): the independent check of qfx's runtime.

    python tools/ort_check/run.py [--report REPORT.json] MODEL.onnx OUT.npy IN.npy [IN2.npy ...]

Inputs are matched to the model's inputs in order; the first output is saved.
With --report, the qfx report.json beside the model gets "onnxruntime_check"
({"onnxruntime": version, "graph_optimization": level, "inputs": [...]}) and
"versions"."onnxruntime", written to a temporary file and renamed over it.
ORT_OPT=disabled turns graph optimizations off (ONNX's QDQ semantics: each
DequantizeLinear / QuantizeLinear computed as written); the default is all
optimizations (ONNX Runtime's fused int8 kernels).
Exit codes: 0 ok, 2 usage, 3 onnxruntime not importable, 4 ONNX Runtime error.
"""
import json
import os
import sys

LEVELS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
          "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}


def record(report, version, level, ins):
    """Adds the ONNX Runtime check to qfx's report.json (atomically)."""
    with open(report) as f:
        r = json.load(f)
    r.setdefault("versions", {})["onnxruntime"] = version
    r["onnxruntime_check"] = {"onnxruntime": version, "graph_optimization": level, "inputs": ins}
    tmp = report + ".ort.tmp"
    with open(tmp, "w") as f:
        json.dump(r, f, indent=2)
        f.write("\n")
    os.replace(tmp, report)


def main(argv):
    report = None
    if len(argv) >= 2 and argv[0] == "--report":
        report, argv = argv[1], argv[2:]
    if len(argv) < 3:
        print("usage: run.py [--report REPORT.json] MODEL.onnx OUT.npy IN.npy [IN2.npy ...]", file=sys.stderr)
        return 2
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        print(f"onnxruntime is not importable ({e}): run tools/install_deps.sh", file=sys.stderr)
        return 3
    model, out, ins = argv[0], argv[1], argv[2:]
    level = os.environ.get("ORT_OPT", "all")
    if level not in LEVELS:
        print(f"ORT_OPT={level}: expected one of {', '.join(LEVELS)}", file=sys.stderr)
        return 2
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[level])
    try:
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        if len(ins) < len(names):
            print(f"{model} has {len(names)} inputs, {len(ins)} given", file=sys.stderr)
            return 2
        feeds = {n: np.load(p, allow_pickle=False) for n, p in zip(names, ins)}
        result = sess.run([sess.get_outputs()[0].name], feeds)[0]
    except Exception as e:  # ONNX Runtime raises its own exception types
        print(f"ONNX Runtime cannot run {model}: {e}", file=sys.stderr)
        return 4
    np.save(out, np.ascontiguousarray(result))
    if report:
        try:
            record(report, ort.__version__, level, ins)
        except (OSError, ValueError) as e:
            print(f"cannot record the check in {report}: {e}", file=sys.stderr)
            return 4
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
