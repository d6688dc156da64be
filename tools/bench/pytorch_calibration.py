#!/usr/bin/env python3
"""PyTorch's own post-training quantization, timed, as the baseline for qfx's
calibration and int8 benchmarks (run side by side by tools/bench/*.sh).

    python tools/bench/pytorch_calibration.py MODEL.pt --images N --batch B --res R [--threads T] [--flow fx|pt2e]

--flow fx (default): torch.ao's FX graph mode (prepare_fx / convert_fx, the onednn
engine's default qconfig). --flow pt2e: PyTorch 2's export flow as PyTorch documents
it for x86 CPUs: torch.export, torchao's prepare_pt2e / convert_pt2e with the
X86InductorQuantizer's default config, then torch.compile (Inductor, freezing on), so
the int8 model runs on Inductor's oneDNN-backed kernels.

MODEL.pt is a TorchScript file of a torchvision architecture (--arch resnet18,
mobilenet_v2, ...) with any classifier head: the eager model is rebuilt from
torchvision with the archive's class count and weights. A model that does not fit
the architecture is refused with one line on stderr saying why. Prints one JSON line:
  calib_images_per_s   the prepared model's forward (observers running)
  fp32_ms_per_batch    eager fp32 forward (median of 5)
  int8_ms_per_batch    the converted model (fx: onednn engine; pt2e: compiled), median of 5
  peak_rss_mb
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from fixture_util import functional_relus  # noqa: E402


def timed(fn, reps=5):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts)


def build(arch, state):
    """torchvision's `arch` with the weights in `state`, its head sized to them."""
    make = getattr(torchvision.models, arch, None)
    if make is None or not callable(make):
        raise SystemExit(f"--arch {arch}: not a torchvision architecture")
    m = make()
    ref = m.state_dict()
    if set(ref) == set(state) and all(state[k].shape == v.shape for k, v in ref.items()):
        m.load_state_dict(state)
        return m
    # A head of its own: the class count is the output size of the default model's last weight.
    last = [k for k, v in ref.items() if k.endswith("weight") and v.dim() >= 2][-1]
    if last not in state:
        raise SystemExit(f"the model is not a torchvision {arch}: it has no '{last}' weight")
    m = make(num_classes=int(state[last].shape[0]))
    try:
        m.load_state_dict(state)
    except RuntimeError as e:
        raise SystemExit(f"the model is not a torchvision {arch}: " + str(e).splitlines()[-1].strip())
    return m


def prepare(flow, m, x):
    if flow == "fx":
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import prepare_fx
        return prepare_fx(m, get_default_qconfig_mapping("onednn"), example_inputs=(x,))
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    # static shapes: every batch below has x's size; ReLU modules as F.relu (functional_relus)
    exported = torch.export.export(functional_relus(m), (x,)).module()
    return prepare_pt2e(exported, quantizer)


def convert(flow, prepared):
    if flow == "fx":
        from torch.ao.quantization.quantize_fx import convert_fx
        return convert_fx(prepared)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e
    import torch._inductor.config as inductor_config
    inductor_config.freezing = True
    return torch.compile(convert_pt2e(prepared))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--res", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flow", choices=("fx", "pt2e"), default="fx")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.quantized.engine = "onednn"
    m = build(a.arch, torch.jit.load(a.model).state_dict())
    m.eval()
    x = torch.randn(a.batch, 3, a.res, a.res)
    out = {"arch": a.arch, "batch": a.batch, "images": a.images, "threads": a.threads, "flow": a.flow,
           "torch": torch.__version__}
    with torch.no_grad():
        m(x)
        out["fp32_ms_per_batch"] = timed(lambda: m(x))
        prepared = prepare(a.flow, m, x)
        prepared(x)  # warm-up (also observes)
        if a.images > 0:
            t0 = time.perf_counter()
            n = 0
            while n < a.images:  # whole batches (the pt2e graph is exported for x's batch)
                prepared(torch.randn(a.batch, 3, a.res, a.res))
                n += a.batch
            out["calib_images_per_s"] = n / (time.perf_counter() - t0)
        q = convert(a.flow, prepared)
        q(x)  # compiles (pt2e)
        out["int8_ms_per_batch"] = timed(lambda: q(x))
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


if __name__ == "__main__":
    main()
