#!/usr/bin/env python3
"""Compares the activation encodings of two qfx ptq runs (encodings.json), such as a
CPU calibration and one with calibration.device: cuda: the same activations, zero
points within a tolerance (default: equal), and scales within a relative tolerance (float
summation order may differ, and with it a histogram bin count).

    compare_encodings.py CPU.json GPU.json [--rtol 1e-6] [--zp-tolerance 0]

Prints one line per differing activation and a summary; exit status 1 when any differ.
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, default=1e-6)
    p.add_argument("--zp-tolerance", type=int, default=0)
    args = p.parse_args()
    a = json.load(open(args.a))["activations"]
    b = json.load(open(args.b))["activations"]
    bad = sorted(set(a) ^ set(b))
    for name in bad:
        print(f"{name}: only in {'the first' if name in a else 'the second'} file")
    worst = 0.0
    for name in sorted(set(a) & set(b)):
        ea, eb = a[name], b[name]
        rel = max((abs(x - y) / max(abs(x), 1e-30) for x, y in zip(ea["scale"], eb["scale"])), default=0.0)
        worst = max(worst, rel)
        zp = max((abs(x - y) for x, y in zip(ea["zero_point"], eb["zero_point"])), default=0)
        if zp > args.zp_tolerance or rel > args.rtol or len(ea["scale"]) != len(eb["scale"]):
            bad.append(name)
            print(f"{name}: scale {ea['scale']} vs {eb['scale']}, zero point {ea['zero_point']} vs {eb['zero_point']}")
    print(f"encodings: {len(set(a) & set(b))} activations compared, {len(bad)} differ, "
          f"largest relative scale difference {worst:.2e} (tolerance {args.rtol:g})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
