#!/usr/bin/env python3
"""The torchvision model zoo for tools/zoo/run.sh (the torch and torchvision of
requirements.txt, used only as users export their models).

    zoo.py list                       the architectures (torchvision's classifiers, then
                                      FAMILIES: segmentation, detection, 1-D audio,
                                      GroupNorm / InstanceNorm, recurrent), one "name
                                      size" per line
    zoo.py export ARCH DIR            DIR/ARCH.pt (TorchScript, random weights,
                                      batch-norm statistics re-estimated on random
                                      inputs) and DIR/ARCH.pt2 (torch.export of the same
                                      model), DIR/ARCH.cal.npy and DIR/ARCH.eval.npy
                                      (random N(0, 1) images), DIR/ARCH.torch_ao.json
                                      (torch.ao FX PTQ's int8 output cosine
                                      against fp32 on the same weights and inputs,
                                      or why torch.ao could not quantize the model;
                                      PT2E's, under "pt2e")
    zoo.py header                     the table's header (markdown)
    zoo.py row ARCH DIR               one table row from DIR/ARCH/report.json (qfx ptq),
                                      DIR/ARCH.torch_ao.json, DIR/ARCH.qfx.npy and
                                      DIR/ARCH.ort.npy, DIR/ARCH.ort_plain.npy (qfx run,
                                      ONNX Runtime, ONNX Runtime without graph
                                      optimisations, on the int8 model); exit status 1
                                      where the row fails

The cosine is the one qfx's report computes: sum(a*b) / (|a| |b|) over the whole
output batch. torch.ao runs with the 'onednn' engine and its default qconfig mapping
(per-channel symmetric int8 weights, per-tensor uint8 activations with HistogramObserver),
calibrated on ARCH.cal.npy, compared on ARCH.eval.npy.
"""
import copy
import json
import os
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from fixture_util import functional_relus, strip_debug  # noqa: E402
from detection import DETECTION, build_detector, post_module_type  # noqa: E402

# Every classification architecture the installed torchvision lists
# (torchvision.models.list_models(module=torchvision.models)). Input sizes: 224 where a
# 2-core machine runs the model in seconds, smaller for heavier ones (every size keeps
# the adaptive pools' inputs at least their outputs; ViTs are built for their size).
SIZES = {
    "resnet50": 160, "resnet101": 128, "resnet152": 128,
    "resnext50_32x4d": 128, "resnext101_32x8d": 96, "resnext101_64x4d": 96,
    "wide_resnet50_2": 128, "wide_resnet101_2": 96,
    "vgg11": 224, "vgg11_bn": 160, "vgg13": 128, "vgg13_bn": 128, "vgg16": 128, "vgg16_bn": 128,
    "vgg19": 128, "vgg19_bn": 128,
    "densenet121": 128, "densenet161": 128, "densenet169": 128, "densenet201": 128,
    "googlenet": 160, "inception_v3": 160,
    "efficientnet_b0": 160, "efficientnet_b1": 128, "efficientnet_b2": 128, "efficientnet_b3": 128,
    "efficientnet_b4": 96, "efficientnet_b5": 96, "efficientnet_b6": 96, "efficientnet_b7": 96,
    "efficientnet_v2_s": 128, "efficientnet_v2_m": 96, "efficientnet_v2_l": 96,
    "regnet_x_1_6gf": 160, "regnet_x_3_2gf": 128, "regnet_x_8gf": 128, "regnet_x_16gf": 96, "regnet_x_32gf": 96,
    "regnet_y_1_6gf": 160, "regnet_y_3_2gf": 128, "regnet_y_8gf": 128, "regnet_y_16gf": 96, "regnet_y_32gf": 96,
    "regnet_y_128gf": 64,
    "convnext_tiny": 96, "convnext_small": 96, "convnext_base": 64, "convnext_large": 64,
    "vit_b_16": 96, "vit_b_32": 96, "vit_l_16": 64, "vit_l_32": 64, "vit_h_14": 56,
    "swin_t": 224, "swin_s": 96, "swin_b": 96, "swin_v2_t": 128, "swin_v2_s": 96, "swin_v2_b": 96,
    "maxvit_t": 224,
}


# Beyond classification: torchvision's segmentation models (dictionary output "out",
# [N, 21, H, W]) at 64x64, its detectors (detection.py: the network deployed, the
# post-processing on the host; the table compares the first head output and reports the
# boxes' agreement), and the fixtures' 1-D keyword spotter ([N, 40, 100] mel bands),
# GroupNorm / InstanceNorm network ([N, 3, 32, 32]) and recurrent networks (a Conv1d, a
# two-layer bidirectional LSTM or GRU, a linear head; [N, 8, 20]).
SEGMENTATION = ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50", "deeplabv3_resnet50"]
FAMILIES = SEGMENTATION + list(DETECTION) + ["kws_1d", "norm_net", "lstm_net", "gru_net"]


def archs():
    return torchvision.models.list_models(module=torchvision.models) + FAMILIES


def input_shape(arch):
    """One sample's shape."""
    if arch == "kws_1d":
        return (40, 100)
    if arch == "norm_net":
        return (3, 32, 32)
    if arch in ("lstm_net", "gru_net"):
        return (8, 20)
    size = 64 if arch in SEGMENTATION else DETECTION[arch] if arch in DETECTION else spec(arch)[0]
    return (3, size, size)


def spec(arch):
    """(input size, constructor kwargs) of `arch`."""
    size = SIZES.get(arch, 224)
    kw = {}
    if arch in ("googlenet", "inception_v3"):
        kw = {"aux_logits": False, "init_weights": True}
    elif arch.startswith("vit_"):
        kw = {"image_size": size}
    return size, kw


CAL, EVAL = 32, 16


def build_family(arch):
    """A model of FAMILIES, random weights, batch-norm statistics of random inputs."""
    from export_models import KeywordSpotter, NormNet, RecurrentNet, segmentation_model
    if arch in SEGMENTATION:
        return segmentation_model(arch)
    if arch in DETECTION:
        return build_detector(arch)[0]
    torch.manual_seed(0)
    if arch in ("lstm_net", "gru_net"):
        return RecurrentNet(arch[:-4]).eval()
    m = KeywordSpotter() if arch == "kws_1d" else NormNet()
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn((8,) + input_shape(arch)))
    return m.eval()


def main_output(y):
    """The output the table compares: "out" of a dictionary output, the first of several."""
    if isinstance(y, dict):
        return y["out"]
    return y[0] if isinstance(y, (list, tuple)) else y


def build(arch):
    if arch in FAMILIES:
        return build_family(arch), input_shape(arch)[-1]
    size, kw = spec(arch)
    torch.manual_seed(0)
    m = getattr(torchvision.models, arch)(weights=None, **kw)
    reinit_zero_heads(m)
    m.train()
    with torch.no_grad():  # batch-norm statistics of random inputs (random weights)
        for _ in range(3):
            m(torch.randn(8, 3, size, size))
    return m.eval(), size


def reinit_zero_heads(m):
    """torchvision starts some classifier heads (ViT) and class tokens at zero: outputs
    all zero make any cosine void, and no trained model has them."""
    g = torch.Generator().manual_seed(1)
    for name, p in m.named_parameters():
        if p.dim() >= 1 and float(p.detach().abs().max()) == 0.0 and not name.endswith("bias"):
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * (0.05 if p.dim() == 2 else 1.0))


def cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float((a * b).sum() / (a.norm() * b.norm() + 1e-30))


def torch_ao_cosine(m, size, cal, ev):
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.backends.quantized.engine = "onednn"
    try:
        with torch.no_grad():
            fp = main_output(m(ev))
            p = prepare_fx(m, get_default_qconfig_mapping("onednn"), (cal[:1],))
            for i in range(0, len(cal), 8):
                p(cal[i:i + 8])
            q = convert_fx(p)
            return {"cosine": cosine(main_output(q(ev)), fp)}
    except Exception as e:  # torch.ao cannot trace or convert every model
        return {"cosine": None, "reason": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:160])}


def export_program(m, shape, path):
    """ARCH.pt2 (torch.export.save) with a dynamic batch, or batch 8 (the batch
    run.sh calibrates and evaluates with) where the model does not export with one;
    None, or why torch.export could not export the model."""
    x = torch.randn((8,) + shape)
    try:
        batch = torch.export.Dim("batch", min=1, max=1024)
        ep = torch.export.export(m, (x,), dynamic_shapes=({0: batch},))
    except Exception:
        try:
            ep = torch.export.export(m, (x,))
        except Exception as e:
            return "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:160])
    torch.export.save(ep, path)
    return None


def pt2e_cosine(m, cal, ev):
    """PyTorch 2's own quantization flow (PT2E, torchao): the exported program,
    X86InductorQuantizer with its default static config (ReLU modules called as
    F.relu: fixture_util.functional_relus), the same calibration and
    evaluation batches (8 at a time); the converted reference model run in eager mode."""
    try:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
        quantizer = xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config())
        with torch.no_grad():
            fp = main_output(m(ev))
            gm = torch.export.export(functional_relus(copy.deepcopy(m)), (cal[:8],)).module()
            p = prepare_pt2e(gm, quantizer)
            for i in range(0, len(cal), 8):
                p(cal[i:i + 8])
            q = convert_pt2e(p)
            out = torch.cat([main_output(q(ev[i:i + 8])) for i in range(0, len(ev), 8)])
            return {"cosine": cosine(out, fp)}
    except Exception as e:  # PT2E cannot export or quantize every model
        return {"cosine": None, "reason": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:160])}


def export(arch, out):
    os.makedirs(out, exist_ok=True)
    m, size = build(arch)
    path = os.path.join(out, arch + ".pt")
    torch.jit.script(m).save(path)
    strip_debug(path)
    rng = np.random.default_rng(0)
    shape = input_shape(arch)
    cal = rng.normal(0, 1, (CAL,) + shape).astype(np.float32)
    ev = rng.normal(0, 1, (EVAL,) + shape).astype(np.float32)
    np.save(os.path.join(out, arch + ".cal.npy"), cal)
    np.save(os.path.join(out, arch + ".eval.npy"), ev)
    net = m.net if arch in DETECTION else m  # PyTorch's flows quantize a detector's network
    res = torch_ao_cosine(net, size, torch.from_numpy(cal), torch.from_numpy(ev))
    res["size"] = size
    res["input_shape"] = [-1] + list(shape)
    res["output"] = "out" if arch in SEGMENTATION else 0  # evaluation.output
    if arch in DETECTION:  # qfx ptq: the post-processing kept whole, left to the host
        res["wrap"] = post_module_type(arch)
        res["metric"] = "detection"
        res["pt2"] = "the post-processing has data-dependent shapes: qfx reads the TorchScript file"
    else:
        res["pt2"] = export_program(m, shape, os.path.join(out, arch + ".pt2"))
    res["pt2e"] = pt2e_cosine(net, torch.from_numpy(cal), torch.from_numpy(ev))
    with open(os.path.join(out, arch + ".torch_ao.json"), "w") as f:
        json.dump(res, f)


HEADER = ("| architecture | input | qfx read | traced nodes | int8 ops | float ops | int8 cosine | PyTorch FX PTQ cosine "
          "| PT2E cosine | ONNX Runtime vs qfx | pass |\n|---|---|---|---|---|---|---|---|---|---|---|")


def row(arch, d):
    """The rule: cosine >= torch.ao's - 0.01 where torch.ao quantizes the model, >= 0.98
    elsewhere, and >= PT2E's - 0.002 where PT2E quantizes it; ONNX Runtime agrees with qfx's runtime: the cosine between their
    outputs is >= 0.999, or, for deep models whose float groups (softmax, LayerNorm,
    GELU) round differently in every implementation, at least the cosine between
    ONNX Runtime's own two runs (fused int8 kernels, and the plain QDQ graph in float
    with optimisations disabled) minus 0.0005. The predicted class and the largest
    difference are reported, not required: random-weight logits are often within an
    int8 step of each other."""
    ao = json.load(open(os.path.join(d, arch + ".torch_ao.json")))
    rep = json.load(open(os.path.join(d, arch, "report.json")))
    c = rep["evaluation"]["cosine_int8_vs_fp32"]
    # int8 ops compute on integer codes (QLinear*, QLut, MaxPool / Flatten on codes);
    # float ops compute in float32 between a DequantizeLinear and a QuantizeLinear.
    fl, int8 = {}, 0
    for k in rep["kernels"]:
        if k["op"] in ("QuantizeLinear", "DequantizeLinear", "Identity"):  # Identity: naming an output
            continue
        if k.get("dtype") in ("uint8", "int8", "int16"):
            int8 += 1
        elif k.get("dtype") == "float32":
            fl[k["op"]] = fl.get(k["op"], 0) + 1
    first = os.path.join(d, arch + ".qfx.npy")  # a model of several outputs: qfx run writes one file each
    a = np.load(first if os.path.exists(first) else os.path.join(d, arch + ".qfx.output_0.npy"))
    b = np.load(os.path.join(d, arch + ".ort.npy"))
    plain = np.load(os.path.join(d, arch + ".ort_plain.npy"))
    ort_self = cosine(torch.from_numpy(b), torch.from_numpy(plain)) if b.shape == plain.shape else 0.0
    agree = float((a.argmax(1) == b.argmax(1)).mean()) if a.shape == b.shape else 0.0  # per pixel for segmentation
    diff = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)) if a.shape == b.shape else float("inf")
    bar = ao["cosine"] - 0.01 if ao["cosine"] is not None else 0.98
    ort_cos = cosine(torch.from_numpy(a), torch.from_numpy(b)) if a.shape == b.shape else 0.0
    pt2e = ao.get("pt2e") or {"cosine": None, "reason": "not measured"}
    ok = c >= bar and ort_cos >= min(0.999, ort_self - 0.0005) and (pt2e["cosine"] is None or c >= pt2e["cosine"] - 0.002)

    def cell(r):
        return "%.5f" % r["cosine"] if r["cosine"] is not None else "n/a (%s)" % r["reason"].split(". ")[0].replace("|", "/")
    fls = ", ".join("%s %d" % kv for kv in sorted(fl.items())) or "none"
    read = ".pt2" if rep["model"].endswith(".pt2") else ".pt (torch.export: %s)" % (ao.get("pt2") or "not tried").replace("|", "/")
    shape = ao.get("input_shape", [-1, 3, ao["size"], ao["size"]])[1:]
    det = rep["evaluation"].get("detection")
    boxes = "; boxes: int8 finds %.1f%% of fp32's %d (IoU >= 0.5), score diff %.4f" % (
        100 * det["recall"], det["fp32_boxes"], det["score_mean_abs_diff"]) if det else ""
    print("| %s | %s | %s | %d | %d | %s | %.5f%s | %s | %s | cosine %.5f (its own two runs: %.5f), max diff %.4f, same class %d/%d | %s |"
          % (arch, "x".join(str(d) for d in shape), read, rep.get("traced_nodes", 0), int8, fls, c, boxes, cell(ao), cell(pt2e), ort_cos,
             ort_self, diff, round(agree * a[:, 0].size), a[:, 0].size, "yes" if ok else "**no**"))
    return ok


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "list":
        for a in archs():
            print(a, input_shape(a)[-1])
    elif len(sys.argv) == 4 and sys.argv[1] == "export":
        if sys.argv[2] not in archs():
            sys.exit("zoo.py: unknown architecture '%s' (zoo.py list)" % sys.argv[2])
        export(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2 and sys.argv[1] == "header":
        print(HEADER)
    elif len(sys.argv) == 4 and sys.argv[1] == "row":
        sys.exit(0 if row(sys.argv[2], sys.argv[3]) else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
