#!/usr/bin/env python3
"""Compares two qfx qat runs of one config that differ only in training.device (their
report.json): the float and deployed int8 top-1 and the fake-quant top-1 after training
must agree within a tolerance (the GPU's float sums differ in order, so the runs drift
apart a little), and both must have trained the same number of steps. Prints a table
with each run's time per step.

    compare_qat.py CPU_REPORT.json GPU_REPORT.json [--points 2.0]

Exit status 1 when they differ by more than the tolerance (percentage points).
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--points", type=float, default=2.0)
    args = p.parse_args()
    runs = [json.load(open(f)) for f in (args.a, args.b)]
    print("| device | steps | ms per step | top-1 fp32 | fake-quant | int8 |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in runs:
        t, e = r["training"], r["evaluation"]
        print(f"| {t.get('device', 'cpu')} | {t['steps']} | {t['ms_per_step']:.1f} | {100 * e['top1_fp32']:.2f} | "
              f"{100 * e['top1_fakequant']:.2f} | {100 * e['top1_int8']:.2f} |")
    bad = []
    if runs[0]["training"]["steps"] != runs[1]["training"]["steps"]:
        bad.append("steps")
    for key in ("top1_fp32", "top1_fakequant", "top1_int8"):
        d = 100 * abs(runs[0]["evaluation"][key] - runs[1]["evaluation"][key])
        if d > args.points:
            bad.append(f"{key} ({d:.2f} points)")
    print("qat: " + ("the runs agree" if not bad else "differ in " + ", ".join(bad)) +
          f" (tolerance {args.points:g} points)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
