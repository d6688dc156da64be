"""Renders docs/fx.md's Core ATen table from the op test's results.

Usage: core_aten_table.py RESULTS_JSON CASES_MANIFEST

RESULTS_JSON is what ``qfx_op_check`` writes (ctest core_aten_ops keeps it as
build/core_aten_results.json); CASES_MANIFEST the manifest.json of
tests/ops/core_aten_cases.py (for the full operator set). Prints the markdown block
that goes between the ``<!-- core-aten:begin -->`` and ``<!-- core-aten:end -->``
markers: one row per supported operator (the ONNX ops its test programs ran on qfx's
runtime), then the operators that are not, with the first reason qfx gives.
"""
import json
import re
import sys


def main():
    results = json.load(open(sys.argv[1]))
    manifest = json.load(open(sys.argv[2]))
    core = manifest["core_ops"]
    supported = sorted(op for op, r in results.items() if r["supported"] and op in core)
    print(f"{len(supported)} of the {len(core)} Core ATen operator names of torch {manifest['torch'].split('+')[0]} are supported:\n")
    print("| Core ATen op | ONNX ops its test programs run |")
    print("|---|---|")
    for op in supported:
        print(f"| `{op}` | {', '.join(results[op]['onnx'])} |")
    print("\nNot supported (each a clear `UnsupportedOpError` naming the node):\n")
    print("| op | why |")
    print("|---|---|")
    for op in core:
        if op in supported:
            continue
        r = results.get(op)
        if r is None:
            why = "backward, random or training-only: no case"
        else:
            passed = [name for name, c in r["cases"].items() if c["status"] == "pass"]
            name, c = next((name, c) for name, c in r["cases"].items() if c["status"] != "pass")
            why = re.sub(r"^export_onnx: node '[^']*' \([^)]*\): ", "", c["detail"]).replace("|", "/")
            if passed:
                why = f"case {name}: {why} (passes: {', '.join(passed)})"
        print(f"| {op} | {why} |")


if __name__ == "__main__":
    main()
