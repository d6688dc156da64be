#!/usr/bin/python3
"""PyTorch 1.13's own FX post-training quantization, timed, as the baseline for
qfx's calibration and int8 benchmarks (run side by side by tools/bench/*.sh).

    /usr/bin/python3 tools/bench/pytorch_calibration.py MODEL.pt --images N --batch B --res R [--threads T]

MODEL.pt is a TorchScript file whose `original_name` is a torchvision
architecture (resnet18, mobilenet_v2); the eager model is rebuilt from
torchvision with the archive's weights. Prints one JSON line:
  calib_images_per_s   prepare_fx(default onednn qconfig, HistogramObserver) forward
  fp32_ms_per_batch    eager fp32 forward (median of 5)
  int8_ms_per_batch    convert_fx model on the onednn engine (median of 5)
  peak_rss_mb
"""
import argparse
import json
import resource
import statistics
import time

import torch
import torchvision
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx


def timed(fn, reps=5):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--res", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.quantized.engine = "onednn"
    m = getattr(torchvision.models, a.arch)()
    m.load_state_dict(torch.jit.load(a.model).state_dict())
    m.eval()
    x = torch.randn(a.batch, 3, a.res, a.res)
    out = {"arch": a.arch, "batch": a.batch, "images": a.images, "threads": a.threads}
    with torch.no_grad():
        m(x)
        out["fp32_ms_per_batch"] = timed(lambda: m(x))
        prepared = prepare_fx(m, get_default_qconfig_mapping("onednn"), example_inputs=(x,))
        prepared(x)  # warm-up (also observes)
        if a.images > 0:
            t0 = time.perf_counter()
            for i in range(0, a.images, a.batch):
                prepared(torch.randn(min(a.batch, a.images - i), 3, a.res, a.res))
            out["calib_images_per_s"] = a.images / (time.perf_counter() - t0)
        q = convert_fx(prepared)
        q(x)
        out["int8_ms_per_batch"] = timed(lambda: q(x))
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


if __name__ == "__main__":
    main()
