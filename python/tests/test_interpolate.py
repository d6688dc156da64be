"""Bicubic interpolation (F.interpolate(mode="bicubic"), aten.upsample_bicubic2d) through
qfx: exported as ONNX Resize (cubic, PyTorch's coefficient -0.75), run on qfx's runtime
and on ONNX Runtime against the module itself (libtorch), and read back from the ONNX
model qfx wrote."""

import numpy as np
import onnxruntime as ort
import pytest
import qfx
import torch
import torch.nn.functional as F


class Up(torch.nn.Module):
    def __init__(self, size=None, scale=None, align=False):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(6, 4, 3, padding=1)
        self.size, self.scale, self.align = size, scale, align

    def forward(self, x):
        y = F.interpolate(self.conv1(x), size=self.size, scale_factor=self.scale, mode="bicubic", align_corners=self.align)
        return self.conv2(torch.relu(y))


@pytest.mark.parametrize("size,scale,align", [(None, 2.0, False), ((11, 13), None, True), ((5, 7), None, False)])
def test_bicubic_matches_pytorch_on_qfx_and_onnxruntime(tmp_path, size, scale, align):
    torch.manual_seed(1)
    model = Up(size, scale, align).eval()
    x = torch.randn(40, 3, 8, 9)
    r = qfx.quantize(model, (x[:2],), [x[:32]], output_dir=tmp_path / "out", num_samples=32,
                     evaluation_data=[x[32:]], progress=False)
    fp32 = r.output_dir / "model_fp32.onnx"
    with torch.no_grad():
        want = model(x[32:]).numpy()
    (got,) = qfx.runtime.Model(fp32, "reference").run(x[32:].numpy()).values()
    s = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"])
    (onnxrt,) = s.run(None, {s.get_inputs()[0].name: x[32:].numpy()})
    top = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-5 * top
    assert np.abs(onnxrt - want).max() <= 1e-5 * top
    assert r.metrics["cosine_int8_vs_fp32"] > 0.99
    # The float ONNX model read back: qfx's fx graph on libtorch against the runtime.
    np.save(tmp_path / "x.npy", x[:16].numpy())
    back = qfx.ptq({"model": {"path": str(fp32), "input_shape": [-1, 3, 8, 9]},
                    "calibration": {"data": {"format": "npy", "images": str(tmp_path / "x.npy")}, "num_samples": 16},
                    "evaluation": {"data": {"format": "npy", "images": str(tmp_path / "x.npy")}, "metric": "cosine",
                                   "num_samples": 16, "sqnr_samples": 0},
                    "output": {"dir": str(tmp_path / "back")}}, progress=False)
    assert back.metrics["fp32_runtime_vs_libtorch_max_rel_error"] <= 1e-5
    assert back.metrics["cosine_int8_vs_fp32"] > 0.99
