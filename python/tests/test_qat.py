"""qfx.prepare_qat in a Python loop: the module trains the C++ graph's own tensors,
its modes and switches act, and qfx.convert's int8 model runs as the fake-quant
model predicts (checked on the runtime and on the reference backend)."""

import numpy as np
import pytest
import qfx
import torch
import yaml
from fashion import images, labels


@pytest.fixture(scope="module")
def default_qat(fixtures):
    """The default QAT job's model and qconfig (configs/qat/fashion_mobilenet.yaml)."""
    import qfx._C as C
    with open(C.find_config("qat/fashion_mobilenet.yaml")) as f:
        cfg = yaml.safe_load(f)
    return str(fixtures / "fashion_mobilenet.pt"), cfg


def test_parameters_are_the_graphs_own(default_qat):
    path, cfg = default_qat
    x = images("t10k")[:8]
    m = qfx.prepare_qat(path, (x,), qconfig=cfg["qconfig"])
    params = dict(m.named_parameters())
    assert params and all(isinstance(p, torch.nn.Parameter) and p.requires_grad for p in params.values())
    m.eval()
    before = m(x).detach()
    name, w = next((n, p) for n, p in params.items() if p.dim() == 4)
    with torch.no_grad():
        w.mul_(0.5)  # an in-place change to the Python tensor is a change to the C++ graph's weight
    assert not torch.equal(before, m(x).detach()), name
    assert set(m.state_dict()) >= set(params)


def test_a_python_loop_trains_and_converts(default_qat, tmp_path):
    path, cfg = default_qat
    tr = cfg["training"]
    x, y = images("train"), labels("train")
    xt, yt = images("t10k")[:512], labels("t10k")[:512]
    m = qfx.prepare_qat(path, (x[:2],), target=cfg["backend"], qconfig=cfg["qconfig"])
    opt = torch.optim.SGD(m.parameters(), lr=tr["optimizer"]["lr"], momentum=tr["optimizer"]["momentum"])
    g = torch.Generator().manual_seed(0)
    for step in range(30):
        b = torch.randint(0, x.shape[0], (tr["batch_size"],), generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x[b]), y[b])
        loss.backward()
        assert all(p.grad is not None for p in m.parameters())
        opt.step()
    m.eval()
    with torch.no_grad():
        fq = m(xt)
    assert (fq.argmax(1) == yt).float().mean().item() > 0.85  # the float model: 92 % on these images
    r = qfx.convert(m, tmp_path / "out")
    assert r.model_int8.is_file() and r.encodings.is_file() and r.float_ops == []
    (q,) = qfx.runtime.Model(r.model_int8, "onednn").run(xt).values()
    (ref,) = qfx.runtime.Model(r.model_int8, "reference").run(xt.numpy()).values()
    assert np.array_equal(q.numpy(), ref)  # the deployed kernels equal the target's arithmetic
    assert (q.argmax(1) == fq.argmax(1)).float().mean().item() >= 0.97  # int8 predicts as fake quant does
    assert not m.training  # convert leaves the mode as it was


def test_modes_and_switches(default_qat):
    path, cfg = default_qat
    x = images("t10k")[:64]
    m = qfx.prepare_qat(path, (x[:2],), qconfig=cfg["qconfig"])
    stats = {n: b for n, b in m.named_buffers() if n.endswith("running_mean")}
    assert stats
    snapshot = {n: b.clone() for n, b in stats.items()}
    m.eval()
    with torch.no_grad():
        a, b = m(x), m(x)
    assert torch.equal(a, b) and all(torch.equal(snapshot[n], t) for n, t in stats.items())
    m.train()
    with torch.no_grad():
        m(x)
    assert any(not torch.equal(snapshot[n], t) for n, t in stats.items())  # batch statistics update in train mode
    m.freeze_bn_stats()
    frozen = {n: b.clone() for n, b in stats.items()}
    with torch.no_grad():
        m(x)
    assert all(torch.equal(frozen[n], t) for n, t in stats.items())
    m.eval()
    assert m.set_quant_state("float") > 0
    with torch.no_grad():
        f = m(x)
    m.set_quant_state("fake_quant")
    with torch.no_grad():
        q = m(x)
    assert not torch.equal(f, q)


def test_lsq_scales_are_trained_parameters(default_qat):
    path, cfg = default_qat
    x, y = images("t10k")[:64], labels("t10k")[:64]
    lsq = {"global": {"activation": {"learnable": True}, "weight": {"learnable": True}}}
    plain = {n for n, _ in qfx.prepare_qat(path, (x[:2],)).named_parameters()}
    m = qfx.prepare_qat(path, (x[:2],), qconfig=lsq)
    scales = {n: p for n, p in m.named_parameters() if n not in plain}
    assert scales and all(p.numel() >= 1 for p in scales.values())
    before = {n: p.detach().clone() for n, p in scales.items()}
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
    assert any(not torch.equal(before[n], p.detach()) for n, p in scales.items())  # LSQ's gradient reached them


def test_bad_arguments(default_qat, tmp_path):
    path, cfg = default_qat
    x = images("t10k")[:2]
    with pytest.raises(qfx.ConfigError, match="weight"):
        qfx.prepare_qat(path, (x,), qconfig={"global": {"weight": {"bits": 99}}})
    with pytest.raises(qfx.ConfigError, match="no_such_target"):
        qfx.prepare_qat(path, (x,), target="no_such_target")
    m = qfx.prepare_qat(path, (x,), qconfig=cfg["qconfig"])
    with pytest.raises(qfx.ArgumentError, match="float32"):
        m.half()
    with pytest.raises(qfx.ArgumentError, match="'int4' is not one of"):
        m.set_quant_state("int4")
    with pytest.raises(qfx.ArgumentError, match="QatModule"):
        qfx.convert(torch.nn.Linear(2, 2), tmp_path)
