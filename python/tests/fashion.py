"""Fashion-MNIST as the default jobs read it (Debian's dataset-fashion-mnist, IDX),
normalised as configs/qat/fashion_mobilenet.yaml says."""

import gzip

import numpy as np
import torch

ROOT = "/usr/share/datasets/fashion-mnist/"
MEAN, STD = 0.2860, 0.3530


def _idx(name):
    with gzip.open(ROOT + name) as f:
        b = f.read()
    n = int.from_bytes(b[4:8], "big")
    if b[3] == 3:
        return np.frombuffer(b, np.uint8, offset=16).reshape(n, 1, 28, 28)
    return np.frombuffer(b, np.uint8, offset=8)


def images(split):
    """[N, 1, 28, 28] float32, normalised; split "train" (60,000) or "t10k" (10,000)."""
    x = torch.from_numpy(_idx(f"{split}-images-idx3-ubyte.gz").astype(np.float32))
    return (x / 255 - MEAN) / STD


def labels(split):
    """[N] int64 class ids."""
    return torch.from_numpy(_idx(f"{split}-labels-idx1-ubyte.gz").astype(np.int64))
