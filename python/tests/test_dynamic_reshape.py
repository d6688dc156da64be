"""Reshapes whose target shape holds a multiple of the dynamic batch and an inferred dim
(MobileViT's unfolding of patches: [batch * patch_area, patches, -1]) export as a Reshape
whose shape is computed at run time, and run at batches other than the traced one on
qfx's runtime and ONNX Runtime as in PyTorch."""

import numpy as np
import onnxruntime as ort
import qfx
import torch


class Patches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.conv(x)
        b, c, h, w = y.shape
        p = y.reshape(b * c * h // 2, 2, w // 2, 2).transpose(1, 2).reshape(b, c, h * w // 4, 4)
        p = p.transpose(1, 3).reshape(b * 4, h * w // 4, -1)       # two dims ONNX cannot infer alone
        p = torch.relu(self.fc(p))
        return p.reshape(b, 4, h * w // 4, c).mean(1)


def test_reshape_with_a_multiple_of_the_batch_and_an_inferred_dim(tmp_path):
    torch.manual_seed(0)
    model = Patches().eval()
    x = torch.randn(40, 3, 8, 8)
    r = qfx.quantize(model, (x[:2],), [x[:32]], output_dir=tmp_path / "out", num_samples=32, evaluation_data=[x[35:]],
                     progress=False)
    fp32 = r.output_dir / "model_fp32.onnx"
    for batch in (1, 5):
        xb = x[32:32 + batch]
        with torch.no_grad():
            want = model(xb).numpy()
        (got,) = qfx.runtime.Model(fp32).run(xb.numpy()).values()
        s = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"])
        (onnxrt,) = s.run(None, {s.get_inputs()[0].name: xb.numpy()})
        assert got.shape == want.shape == onnxrt.shape
        assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
        assert np.abs(onnxrt - want).max() <= 1e-5 * np.abs(want).max()
    assert r.metrics["cosine_int8_vs_fp32"] > 0.99
