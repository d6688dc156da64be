#!/usr/bin/env python3
"""PyTorch's own speed on this GPU, the anchor beside qfx_runtime_bench's cuda rows.

torchvision models with random weights, eager mode, channels_last, cudnn.benchmark,
fp32 (TF32 off, as qfx's float kernels) and fp16 autocast. Each row is the median of
ITERS timed runs after warm-up runs, in two ways: the input already on the GPU
(PyTorch's best case) and the input copied from pageable host memory in every run and
the output copied back (what qfx_runtime_bench times for qfx).

    pytorch_bench.py [--models resnet18,resnet50,mobilenet_v2] [--batch 1,32,256] [--iters 20]

Prints one Markdown table. Needs torch with CUDA and torchvision.
"""
import argparse
import statistics
import time

import torch
import torchvision


def median_ms(fn, iters):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def run(model, x_host, fp16, from_host, iters):
    x_dev = x_host.cuda().contiguous(memory_format=torch.channels_last)

    def step():
        x = x_host.cuda().contiguous(memory_format=torch.channels_last) if from_host else x_dev
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16, enabled=fp16):
            y = model(x)
        if from_host:
            y.cpu()

    return median_ms(step, iters)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    p.add_argument("--batch", default="1,32,256")
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("pytorch_bench.py: torch sees no CUDA device")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    print("| model | batch | fp32 img/s | fp16 img/s | fp32 img/s, input from host | fp16 img/s, input from host |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in a.models.split(","):
        model = getattr(torchvision.models, name)(weights=None).eval().cuda().to(memory_format=torch.channels_last)
        for batch in (int(b) for b in a.batch.split(",")):
            x = torch.randn(batch, 3, 224, 224)
            rates = []
            for from_host in (False, True):
                for fp16 in (False, True):
                    rates.append(1000.0 * batch / run(model, x, fp16, from_host, a.iters))
            print(f"| {name} | {batch} | " + " | ".join(f"{r:,.0f}" for r in rates) + " |", flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
