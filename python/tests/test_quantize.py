"""qfx.quantize on an in-memory module, checked against the module itself (libtorch)
and the int8 model on the reference backend."""

import sys
from pathlib import Path

import numpy as np
import pytest
import qfx
import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "fixtures"))
from export_float_onnx import SmallCnn as Net  # noqa: E402  conv + bn + relu, mean over H and W, linear


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    torch.manual_seed(0)
    model = Net().eval()
    images = torch.randn(96, 3, 16, 16)
    loader = DataLoader(TensorDataset(images, torch.zeros(96, dtype=torch.long)), batch_size=16)  # (x, label)
    out = tmp_path_factory.mktemp("quantize")
    r = qfx.quantize(model, (images[:2],), loader, target="onednn", output_dir=out, num_samples=64,
                     evaluation_data=[images[64:]], progress=False,
                     activation={"observer": "minmax"}, weight={"granularity": "per_channel"})
    return model, images, r


def test_int8_model_tracks_the_module(quantized):
    model, images, r = quantized
    assert r.model_int8.is_file() and r.output_dir.name.startswith("quantize")
    assert r.report["calibration"]["images"] == 64
    x = images[64:]
    with torch.no_grad():
        want = model(x)
    m = qfx.runtime.Model(r.model_int8)
    assert m.int8_ops() >= 2  # the conv and the linear run on integer kernels
    (got,) = m.run(x).values()
    cos = torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(), dim=0).item()
    assert cos > 0.99
    assert r.metrics["cosine_int8_vs_fp32"] > 0.99  # the same comparison, in qfx's own evaluation


def test_onednn_equals_the_reference_backend(quantized):
    _, images, r = quantized
    x = images[:32].numpy()
    (a,) = qfx.runtime.Model(r.model_int8, "onednn").run(x).values()
    (b,) = qfx.runtime.Model(r.model_int8, "reference").run(x).values()
    assert np.array_equal(a, b)
    assert r.reference_images == r.reference_identical == 0  # evaluation.reference_check defaults to 0


def test_exported_programs_and_bad_arguments(tmp_path):
    model = Net().eval()
    x = torch.randn(8, 3, 16, 16)
    ep = torch.export.export(model, (x[:2],))
    r = qfx.quantize(ep, (x[:2],), [x], output_dir=tmp_path / "ep", num_samples=None, progress=False)
    assert r.model_int8.is_file() and r.report["calibration"]["images"] == 8
    with pytest.raises(qfx.ArgumentError, match="torch.nn.Module or an ExportedProgram"):
        qfx.quantize("model.pt", (x,), [x])
    with pytest.raises(qfx.DataError, match="yielded no samples"):
        qfx.quantize(model, (x[:2],), [], output_dir=tmp_path / "none", progress=False)
    assert not (tmp_path / "none").exists()
