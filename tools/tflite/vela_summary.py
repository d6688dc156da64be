"""Reads the network summary Arm's Vela prints after compiling a .tflite.

Usage: vela_summary.py VELA.log [--min-npu SHARE] [--json]
(VELA.log: what `vela --verbose-cycle-estimate MODEL.tflite` printed)

Prints one line: the operators Vela placed on the NPU and on the CPU, the NPU's
share, and the estimated inference time (Vela's performance model, batch 1).
With --min-npu, exits 1 when the NPU's share is below SHARE (0..1), else prints
"ok" first. --json prints the numbers as a JSON object instead (for tables).
"""
import argparse
import json
import re
import sys


def summary(text):
    ops = {k: int(v) for k, v in re.findall(r"^(CPU|NPU) operators = (\d+)", text, re.M)}
    t = re.search(r"Batch Inference time\s+([\d.]+) ms", text)
    if "NPU" not in ops or t is None:
        raise SystemExit("no network summary in Vela's output:\n" + text[-2000:])
    total = max(ops["NPU"] + ops.get("CPU", 0), 1)
    return {"npu_ops": ops["NPU"], "cpu_ops": ops.get("CPU", 0), "npu_share": ops["NPU"] / total,
            "inference_ms": float(t.group(1))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--min-npu", type=float)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    s = summary(open(a.log).read())
    ok = a.min_npu is None or s["npu_share"] >= a.min_npu
    if a.json:
        print(json.dumps(s))
    else:
        print(("ok " if a.min_npu is not None and ok else "") +
              f"NPU {s['npu_ops']} ops, CPU {s['cpu_ops']} ({s['npu_share']:.1%} on the NPU), "
              f"estimated {s['inference_ms']:.3f} ms per inference")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
