"""qfx.runtime.Model against ONNX Runtime and NumPy."""

import numpy as np
import onnxruntime as ort
import pytest
import qfx
import torch


@pytest.fixture(scope="module")
def float_model(fixtures):
    return str(fixtures / "small_cnn.onnx")  # a float CNN, [N, 3, 16, 16]


def test_float_model_matches_onnxruntime(float_model):
    x = np.random.default_rng(0).standard_normal((5, 3, 16, 16)).astype(np.float32)
    m = qfx.runtime.Model(float_model)
    name = m.inputs[0][0]
    assert m.inputs[0][1:] == ("float32", [-1, 3, 16, 16])
    got = m.run(x)
    want = ort.InferenceSession(float_model).run(None, {name: x})[0]
    (out,) = got.values()
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_external_data_models_load(fixtures):
    path = str(fixtures / "fashion_resnet.onnx")  # torch.onnx.export wrote its weights to fashion_resnet.onnx.data
    x = np.random.default_rng(2).standard_normal((3, 1, 28, 28)).astype(np.float32)
    m = qfx.runtime.Model(path)
    (got,) = m.run(x).values()
    want = ort.InferenceSession(path).run(None, {m.inputs[0][0]: x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(qfx.IoError, match="external data location '../outside.bin' is not a file inside the model's folder"):
        qfx.runtime.Model(fixtures / "bad_external.onnx")


def test_torch_in_torch_out_and_inputs_by_name(float_model):
    x = torch.randn(3, 3, 16, 16)
    m = qfx.runtime.Model(float_model)
    by_position = m(x)
    by_name = m.run({m.inputs[0][0]: x.numpy()})
    (a,), (b,) = by_position.values(), by_name.values()
    assert isinstance(a, torch.Tensor) and isinstance(b, np.ndarray)
    assert torch.equal(a, torch.from_numpy(b))


def test_taps_see_what_numpy_sees(float_model):
    x = np.random.default_rng(1).standard_normal((4, 3, 16, 16)).astype(np.float32)
    m = qfx.runtime.Model(float_model)
    out_name = m.outputs[0][0]
    m.set_taps([out_name], "minmax")
    y = m.run(x)[out_name]
    t = m.taps()[out_name]
    assert t["min"] == y.min() and t["max"] == y.max() and t["count"] == y.size
    with pytest.raises(qfx.ArgumentError, match="kind 'range'"):
        m.set_taps([out_name], "range")


def test_bad_inputs_are_data_errors(float_model):
    m = qfx.runtime.Model(float_model)
    with pytest.raises(qfx.DataError):
        m.run(np.zeros((2, 5, 16, 16), np.float32))
    with pytest.raises(qfx.ArgumentError, match="2 inputs given"):
        m.run(np.zeros((1, 3, 16, 16), np.float32), np.zeros(1, np.float32))
    with pytest.raises(qfx.IoError, match="nothing.onnx"):
        qfx.runtime.Model("nothing.onnx")
    with pytest.raises(qfx.ConfigError, match="no_such_backend"):
        qfx.runtime.Model(float_model, backend="no_such_backend")
