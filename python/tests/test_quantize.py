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


def _sqnr_db(signal, noise):
    return 10 * np.log10(max(signal, 1e-30) / max(noise, 1e-30))


def _fp32_values(model, x):
    """The float module's value at each fx node qfx quantizes in SmallCnn: its input,
    conv + bn + relu (one fused layer, named conv), the mean over H and W, fc."""
    with torch.no_grad():
        conv = torch.relu(model.bn(model.conv(x)))
        mean = conv.mean((2, 3))
        return {"x": x, "conv": conv, "mean": mean, "fc": model.fc(mean)}


def _ort_split(model_path, fp32, x):
    """Each activation QuantizeLinear of the QDQ model on ONNX Runtime, dequantized:
    end to end, and with teacher forcing (every DequantizeLinear of an activation fed
    the codes of the fp32 value instead of the computed ones)."""
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    base = onnx.load(str(model_path))
    inits = {i.name: numpy_helper.to_array(i) for i in base.graph.initializer}
    qs = {n.output[0]: n for n in base.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in inits}

    def qparams(q):
        n = qs[q]
        return float(inits[n.input[1]]), inits[n.input[2]]

    def run(model, feeds):
        del model.graph.output[:]
        model.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in qs)
        s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return dict(zip(qs, s.run(list(qs), feeds)))

    def dequant(q, codes):
        scale, zp = qparams(q)
        return (codes.astype(np.float64) - float(zp)) * scale

    inp = {base.graph.input[0].name: x}
    e2e = run(onnx.load(str(model_path)), inp)
    forced = onnx.load(str(model_path))
    feeds = dict(inp)
    for n in forced.graph.node:
        for i, name in enumerate(n.input):
            if n.op_type == "DequantizeLinear" and name in qs:
                n.input[i] = name + "__forced"
    for q, ref in fp32.items():
        scale, zp = qparams(q)
        info = np.iinfo(zp.dtype)
        feeds[q + "__forced"] = np.clip(np.round(ref / scale) + int(zp), info.min, info.max).astype(zp.dtype)
        forced.graph.input.append(helper.make_tensor_value_info(q + "__forced", helper.np_dtype_to_tensor_dtype(zp.dtype), None))
    own = run(forced, feeds)
    out = {}
    for q, ref in fp32.items():
        ref = ref.astype(np.float64)
        whole, alone, signal = dequant(q, e2e[q]), dequant(q, own[q]), (ref ** 2).sum()
        inherited = ((whole - alone) ** 2).sum()
        out[q] = (_sqnr_db(signal, ((whole - ref) ** 2).sum()), _sqnr_db(signal, ((alone - ref) ** 2).sum()),
                  _sqnr_db(signal, inherited) if inherited > 0 else None)
    return out


def test_own_and_inherited_error_against_onnxruntime(quantized):
    """The report's split of each layer's fake-quant error, recomputed independently:
    fp32 values from the torch module, the int8 QDQ model on ONNX Runtime end to end
    and with every quantized activation replaced by its fp32 value's codes."""
    model, images, r = quantized
    n = r.report["per_layer_sqnr"]["images"]
    x = images[64:64 + n]
    values = _fp32_values(model, x)
    fp32 = {l.value: values[l.node].numpy() for l in r.layers}
    assert len(fp32) == 4
    want = _ort_split(r.model_int8, fp32, x.numpy())
    for layer in r.layers:
        whole, own, inherited = want[layer.value]
        assert layer.sqnr_db_fakequant == pytest.approx(whole, abs=0.05), layer
        assert layer.sqnr_db_own == pytest.approx(own, abs=0.05), layer
        if inherited is None:
            assert layer.sqnr_db_inherited is None, layer
        else:
            assert layer.sqnr_db_inherited == pytest.approx(inherited, abs=0.2), layer
    by_node = {l.node: l for l in r.layers}
    assert by_node["x"].sqnr_db_inherited is None          # the input inherits nothing
    assert by_node["x"].sqnr_db_own == pytest.approx(by_node["x"].sqnr_db_fakequant)
    assert by_node["fc"].sqnr_db_inherited is not None     # later layers do


def test_model_bytes_are_the_written_model(quantized):
    _, images, r = quantized
    data = r.model_bytes()
    assert data == r.model_int8.read_bytes()
    (a,) = qfx.runtime.Model(data).run(images[:4].numpy()).values()
    (b,) = qfx.runtime.Model(r.model_int8).run(images[:4].numpy()).values()
    assert np.array_equal(a, b)
