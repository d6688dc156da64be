#!/usr/bin/env python3
"""Hugging Face transformers models, as users export them, through `qfx ptq`.

    hf.py list                              the cases, one "model attention" per line
    hf.py run [-o DIR] [CASE ...]           export, quantize and compare each case
                                            (CASE: a model, every attention it has, or
                                            MODEL@ATTENTION); prints the markdown table,
                                            exit status 1 if any row fails its rule
    hf.py table DIR                         the table again from DIR's results

Each model is built from a small configuration with random weights (torch.manual_seed(0);
nothing is downloaded: HF_HUB_OFFLINE=1) and exported as transformers' docs show:
`torch.export.export(model, (), kwargs, dynamic_shapes=...)` with a dynamic batch
(Dim "batch"); a model that does not export with one is exported for batch 8 and the
row says so. Inputs: token ids and attention masks int64 [N, 16] (half the rows padded),
images float32 [N, 3, 32, 32] ([N, 3, 64, 64] for MobileViT), Whisper's log-mel features
[N, 16, 32], Wav2Vec2's waveform [N, 400]; 32 calibration and 16 evaluation samples,
batches of 8. Weights left at zero by the model's initialisation (DeiT's class and
distillation tokens and position embeddings) are re-drawn, as tools/zoo/zoo.py does for
torchvision: no trained model has them; batch-norm statistics (MobileViT) are those of the
calibration inputs. Decoders run with use_cache=False. Every model with an SDPA attention is
measured with attn_implementation "sdpa" (the default) and "eager".

Per case, in DIR (default build/zoo_hf): CASE.pt2, CASE.cal.INPUT.npy and
CASE.eval.INPUT.npy, CASE.yaml (the qfx config: model.inputs, one data source per input,
metric cosine), CASE/ (qfx ptq's output), CASE.log, CASE.result.json. The columns:
- qfx int8 cosine: qfx's report, int8 vs fp32 on the evaluation samples, the first output
  (last_hidden_state);
- PT2E cosine: torchao's prepare_pt2e / convert_pt2e with X86InductorQuantizer's default
  static config on the same model exported for batch 8, the same samples (or why PT2E
  could not quantize it);
- ONNX Runtime vs qfx: qfx's int8 model run by ONNX Runtime (tools/ort_check/run.py) and
  by `qfx run`, the cosine between the two outputs, and between ONNX Runtime's own two
  runs (fused int8 kernels; the plain QDQ graph without graph optimisations).
The rule (exit status 1 where a row fails it): qfx's cosine >= PT2E's - 0.002 where PT2E
quantizes the model (its cosine at least 0.9: a lower one is a broken PT2E run, no bar),
>= 0.99 elsewhere; ONNX Runtime agrees with qfx (tools/zoo/zoo.py's
rule: cosine >= 0.999 or >= its own two runs' - 0.0005). A row that cannot be measured
(export, qfx or ONNX Runtime error) fails and says why.

Needs a build (build/tools/qfx or $QFX) and the .venv of tools/install_deps.sh
(transformers, torchao, onnxruntime).
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # random weights from configs: never fetch
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import copy  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from zoo import cosine, reinit_zero_heads  # noqa: E402
from fixture_util import functional_relus  # noqa: E402  (zoo puts tools/fixtures on the path)

CAL, EVAL, BATCH, SEQ, VOCAB = 32, 16, 8, 16, 100
BOTH = ("sdpa", "eager")


def _t():
    import transformers
    return transformers


# Small configurations: 2 layers, hidden size 32, vocabulary 100, 16 tokens.
def _text(cfg_cls, model_cls, **kw):
    def build(attn):
        T = _t()
        return getattr(T, model_cls)(getattr(T, cfg_cls)(attn_implementation=attn, **kw))
    return build


ENCODER = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=64)
DECODER = dict(use_cache=False, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
               pad_token_id=0, bos_token_id=1, eos_token_id=2)
VISION = dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64)


def _whisper_encoder(attn):
    T = _t()
    c = T.WhisperConfig(vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=3,
                        suppress_tokens=None, begin_suppress_tokens=None, d_model=32, encoder_layers=2,
                        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=16, attn_implementation=attn)
    return T.WhisperModel(c).get_encoder()


# name: (builder(attn) -> model, input kind, attention implementations; None: no attention option)
MODELS = {
    "bert": (_text("BertConfig", "BertModel", **ENCODER), "text", BOTH),
    "roberta": (_text("RobertaConfig", "RobertaModel", **dict(ENCODER, max_position_embeddings=70)), "text", BOTH),
    "distilbert": (_text("DistilBertConfig", "DistilBertModel", vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2,
                         hidden_dim=64, max_position_embeddings=64), "text", BOTH),
    "deberta_v2": (_text("DebertaV2Config", "DebertaV2Model", **ENCODER), "text", ("eager",)),
    "vit": (_text("ViTConfig", "ViTModel", **VISION), "image32", BOTH),
    "deit": (_text("DeiTConfig", "DeiTModel", **VISION), "image32", BOTH),
    "swin": (_text("SwinConfig", "SwinModel", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                   num_heads=[2, 2], window_size=4), "image32", BOTH),
    "convnext": (_text("ConvNextConfig", "ConvNextModel", num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32],
                       depths=[1, 1]), "image32", (None,)),
    # MobileViT's default initializer_range 0.02 makes its random-weight output vanish (1e-8).
    "mobilevit": (_text("MobileViTConfig", "MobileViTModel", image_size=64, hidden_sizes=[16, 24, 32],
                        neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], num_attention_heads=2,
                        initializer_range=0.1), "image64", ("eager",)),
    "segformer": (_text("SegformerConfig", "SegformerModel", num_channels=3, num_encoder_blocks=2, depths=[1, 1],
                        sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2],
                        num_attention_heads=[1, 2], mlp_ratios=[2, 2]), "image32", BOTH),
    "whisper_encoder": (_whisper_encoder, "mel", BOTH),
    "wav2vec2": (_text("Wav2Vec2Config", "Wav2Vec2Model", vocab_size=32, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                       conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2),
                 "audio", BOTH),
    "clip_vision": (_text("CLIPVisionConfig", "CLIPVisionModel", **VISION), "image32", BOTH),
    "clip_text": (_text("CLIPTextConfig", "CLIPTextModel", pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        **ENCODER), "text", BOTH),
    "t5_encoder": (_text("T5Config", "T5EncoderModel", vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                         num_heads=2), "text", BOTH),
    "gpt2": (_text("GPT2Config", "GPT2Model", use_cache=False, vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2,
                   n_head=2, bos_token_id=1, eos_token_id=2), "text", BOTH),
    "llama": (_text("LlamaConfig", "LlamaModel", **DECODER), "text", BOTH),
    "qwen2": (_text("Qwen2Config", "Qwen2Model", **DECODER), "text", BOTH),
    "mistral": (_text("MistralConfig", "MistralModel", **DECODER), "text", BOTH),
    "phi": (_text("PhiConfig", "PhiModel", **dict(DECODER, num_key_value_heads=4)), "text", BOTH),
    "gemma": (_text("GemmaConfig", "GemmaModel", **dict(DECODER, num_key_value_heads=1, head_dim=8)), "text", BOTH),
}


def cases():
    """Every (model, attention) pair; attention None: the model has no attention option."""
    return [(m, a) for m, (_, _, attns) in MODELS.items() for a in attns]


def tag_of(model, attn):
    return model if attn is None else "%s_%s" % (model, attn)


def samples(kind, n, rng):
    """{input name: array [n, ...]} for one input kind."""
    if kind == "text":
        ids = rng.integers(3, VOCAB, (n, SEQ)).astype(np.int64)
        mask = np.ones((n, SEQ), np.int64)
        for i in range(0, n, 2):  # every other row padded on the right (pad id 0)
            length = int(rng.integers(4, SEQ))
            mask[i, length:] = 0
            ids[i, length:] = 0
        return {"input_ids": ids, "attention_mask": mask}
    shape = {"mel": (16, 32), "audio": (400,)}.get(kind) or (3, int(kind[5:]), int(kind[5:]))
    name = {"mel": "input_features", "audio": "input_values"}.get(kind, "pixel_values")
    return {name: rng.normal(0, 1, (n,) + shape).astype(np.float32)}


def first_output(y):
    """The output the table compares: a ModelOutput's first field, a sequence's first item."""
    if hasattr(y, "to_tuple"):
        return y.to_tuple()[0]
    if isinstance(y, dict):
        return next(iter(y.values()))
    return y[0] if isinstance(y, (list, tuple)) else y


def short(e):
    return ("%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0]))[:200]


def export_program(model, example, path):
    """torch.export of `model` on keyword inputs with a dynamic batch (batch 8 where it
    does not export with one), saved to `path`; (dynamic?, None) or (None, error)."""
    batch = torch.export.Dim("batch", min=1, max=1024)
    try:
        ep = torch.export.export(model, (), example, dynamic_shapes={k: {0: batch} for k in example})
        dynamic = True
    except Exception:
        try:
            ep = torch.export.export(model, (), example)
            dynamic = False
        except Exception as e:
            return None, short(e)
    torch.export.save(ep, path)
    return dynamic, None


def batches(data, n):
    return [{k: torch.from_numpy(v[i:i + BATCH]) for k, v in data.items()} for i in range(0, n, BATCH)]


def pt2e_cosine(model, cal, ev):
    """PT2E (torchao's prepare_pt2e / convert_pt2e, X86InductorQuantizer's default static
    config) as tools/zoo/zoo.py runs it, on keyword inputs: int8 vs fp32 cosine of the first
    output on `ev`, or why PT2E could not quantize the model."""
    try:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
        quantizer = xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config())
        with torch.no_grad():
            fp = torch.cat([first_output(model(**b)) for b in batches(ev, EVAL)])
            gm = torch.export.export(functional_relus(copy.deepcopy(model)), (), batches(cal, BATCH)[0]).module()
            p = prepare_pt2e(gm, quantizer)
            for b in batches(cal, CAL):
                p(**b)
            q = convert_pt2e(p)
            out = torch.cat([first_output(q(**b)) for b in batches(ev, EVAL)])
            return {"cosine": cosine(out, fp)}
    except Exception as e:  # PT2E cannot export or quantize every model
        return {"cosine": None, "reason": short(e)}


def write_config(tag, out, cal, ev):
    """CASE.yaml: model.inputs (shape with a dynamic batch, dtype), one npy source per input."""
    import yaml

    def data(split, arrays):
        return {k: {"format": "npy", "images": os.path.join(out, "%s.%s.%s.npy" % (tag, split, k))} for k in arrays}
    for split, arrays in (("cal", cal), ("eval", ev)):
        for k, v in arrays.items():
            np.save(os.path.join(out, "%s.%s.%s.npy" % (tag, split, k)), v)
    cfg = {"model": {"path": os.path.join(out, tag + ".pt2"),
                     "inputs": {k: {"shape": [-1] + list(v.shape[1:]), "dtype": str(v.dtype)} for k, v in cal.items()}},
           "calibration": {"data": data("cal", cal), "num_samples": CAL, "batch_size": BATCH},
           "evaluation": {"data": data("eval", ev), "metric": "cosine", "reference_check": BATCH,
                          "sqnr_samples": 0, "batch_size": BATCH},
           "output": {"dir": os.path.join(out, tag), "report_html": False}}
    path = os.path.join(out, tag + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    return path


def run_logged(cmd, log, env=None, timeout=1800):
    """Runs `cmd`, its output appended to `log`; the exit status (124 on timeout)."""
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write("timed out after %d s\n" % timeout)
            return 124


def qfx_error(log):
    """The first `qfx: error` line of `log` (else its last line)."""
    lines = open(log, errors="replace").read().splitlines()
    return next((l for l in lines if "qfx: error" in l), lines[-1] if lines else "no output")


def kernel_counts(report):
    """(int8 kernels, {op: float32 kernels}) of qfx's report, as tools/zoo/zoo.py counts them."""
    fl, int8 = {}, 0
    for k in report.get("kernels", []):
        if k["op"] in ("QuantizeLinear", "DequantizeLinear", "Identity"):
            continue
        if k.get("dtype") in ("uint8", "int8", "int16"):
            int8 += 1
        elif k.get("dtype") == "float32":
            fl[k["op"]] = fl.get(k["op"], 0) + 1
    return int8, fl


def ort_check(qfx, tag, out, inputs, log):
    """qfx run and ONNX Runtime (all optimisations, and none) on CASE/model_int8.onnx with
    the evaluation inputs: {"cosine": qfx vs ORT, "self": ORT vs ORT} or {"error": ...}."""
    import onnx
    model = os.path.join(out, tag, "model_int8.onnx")
    g = onnx.load(model, load_external_data=False).graph
    names, first = [i.name for i in g.input], g.output[0].name
    files = [os.path.join(out, "%s.eval.%s.npy" % (tag, n)) for n in names]
    if len(g.output) > 1:
        qfx_out = os.path.join(out, "%s.qfx.%s.npy" % (tag, first))
    else:
        qfx_out = os.path.join(out, tag + ".qfx.npy")
    cmd = [qfx, "run", model, "-o", os.path.join(out, tag + ".qfx.npy")]
    for n, p in zip(names, files):
        cmd += ["-i", "%s=%s" % (n, p)]
    if run_logged(cmd, log) != 0:
        return {"error": "qfx run: " + qfx_error(log)}
    ort = [sys.executable, os.path.join(ROOT, "tools", "ort_check", "run.py")]
    res = {}
    for key, level in (("ort", "all"), ("ort_plain", "disabled")):
        path = os.path.join(out, "%s.%s.npy" % (tag, key))
        if run_logged(ort + [model, path] + files, log, env=dict(os.environ, ORT_OPT=level)) != 0:
            return {"error": "ONNX Runtime (ORT_OPT=%s): %s" % (level, qfx_error(log))}
        res[key] = torch.from_numpy(np.load(path))
    a = torch.from_numpy(np.load(qfx_out))
    same = a.shape == res["ort"].shape and res["ort"].shape == res["ort_plain"].shape
    return {"cosine": cosine(a, res["ort"]) if same else 0.0,
            "self": cosine(res["ort"], res["ort_plain"]) if same else 0.0}


def stage(log, what):
    """Notes in CASE.log the step that starts (what a timed-out row names)."""
    with open(log, "a") as f:
        f.write("== %s\n" % what)


def last_stage(log):
    """The step CASE.log's last note or command names (None without a log)."""
    if not os.path.exists(log):
        return None
    steps = [l[3:].strip() if l.startswith("== ") else l[2:].split()[0:3] for l in open(log, errors="replace")
             if l.startswith("== ") or l.startswith("$ ")]
    if not steps:
        return None
    last = steps[-1]
    return last if isinstance(last, str) else " ".join(os.path.basename(x) for x in last)


def measure(tag, model, cal, ev, out, qfx):
    """Exports `model` (keyword inputs `cal` / `ev`: {name: array}), runs PT2E, qfx ptq and
    ONNX Runtime; the row's result (also written to CASE.result.json)."""
    t0 = time.time()
    log = os.path.join(out, tag + ".log")
    open(log, "w").close()
    r = {"case": tag}
    stage(log, "torch.export")
    with torch.no_grad():
        dynamic, err = export_program(model, batches(cal, BATCH)[0], os.path.join(out, tag + ".pt2"))
    r["dynamic_batch"], r["export_error"] = dynamic, err
    if err is None:
        stage(log, "PT2E")
        r["pt2e"] = pt2e_cosine(model, cal, ev)
        cfg = write_config(tag, out, cal, ev)
        if run_logged([qfx, "ptq", cfg], log) != 0:
            r["qfx_error"] = qfx_error(log)
        else:
            rep = json.load(open(os.path.join(out, tag, "report.json")))
            r["cosine"] = rep["evaluation"]["cosine_int8_vs_fp32"]
            r["int8_ops"], r["float_ops"] = kernel_counts(rep)
            r["ort"] = ort_check(qfx, tag, out, ev, log)
    r["seconds"] = round(time.time() - t0, 1)
    r["pass"] = passes(r)
    with open(os.path.join(out, tag + ".result.json"), "w") as f:
        json.dump(r, f, indent=1)
    return r


PT2E_WORKS = 0.9  # a PT2E cosine below this is a broken PT2E run, no bar to compare with


def failed(tag, why):
    """The result of a case that could not be measured."""
    return {"case": tag, "export_error": why, "dynamic_batch": None, "pass": False}


def measure_or_fail(tag, model, cal, ev, out, qfx):
    """measure(), or a failed result naming the step and error where the harness raised."""
    try:
        return measure(tag, model, cal, ev, out, qfx)
    except Exception as e:  # a tool that could not start, a file that could not be read
        return failed(tag, "%s: %s" % (last_stage(os.path.join(out, tag + ".log")), short(e)))


def passes(r):
    """The rule of the module docstring."""
    if r.get("cosine") is None or "cosine" not in r.get("ort", {}):
        return False
    p = r["pt2e"]["cosine"]
    bar = p - 0.002 if p is not None and p >= PT2E_WORKS else 0.99
    return r["cosine"] >= bar and r["ort"]["cosine"] >= min(0.999, r["ort"]["self"] - 0.0005)


HEADER = ("| model | attention | export | int8 ops | float ops | qfx int8 cosine | PT2E cosine | ONNX Runtime vs qfx | pass |\n"
          "|---|---|---|---|---|---|---|---|---|")


def cell(s):
    return str(s).replace("|", "/").replace("\n", " ")


def row(r, model, attn):
    """One markdown row of a result."""
    export = "error: " + cell(r["export_error"]) if r["export_error"] else (
        "dynamic batch" if r["dynamic_batch"] else "batch 8 (no dynamic batch)")
    pt2e = r.get("pt2e")
    p = "" if pt2e is None else "%.5f" % pt2e["cosine"] if pt2e["cosine"] is not None else "n/a (%s)" % cell(pt2e["reason"])
    if r.get("qfx_error"):
        q, ops, fl, ort = "qfx ptq failed: " + cell(r["qfx_error"]), "", "", ""
    elif r.get("cosine") is not None:
        q, ops = "%.5f" % r["cosine"], str(r["int8_ops"])
        fl = ", ".join("%s %d" % kv for kv in sorted(r["float_ops"].items())) or "none"
        o = r["ort"]
        ort = cell(o["error"]) if "error" in o else "%.5f (its own two runs: %.5f)" % (o["cosine"], o["self"])
    else:
        q, ops, fl, ort = "", "", "", ""
    return "| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        model, attn or "-", export, ops, fl, q, p, ort, "yes" if r["pass"] else "**no**")


def build_case(model, attn):
    torch.manual_seed(0)
    build, kind, _ = MODELS[model]
    m = build(attn).eval()  # attn None: the configuration's default
    reinit_zero_heads(m)  # DeiT's class / distillation tokens and position embeddings start at zero
    rng = np.random.default_rng(0)
    cal, ev = samples(kind, CAL, rng), samples(kind, EVAL, rng)
    bns = [x for x in m.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:  # batch-norm statistics: the calibration inputs' (cumulative average)
        bn.reset_running_stats()
        bn.momentum = None
    if bns:
        m.train()
        with torch.no_grad():
            for b in batches(cal, CAL):
                m(**b)
        m.eval()
    return m, cal, ev


def select(args):
    """The (model, attention) pairs named by `args` (all where empty)."""
    if not args:
        return cases()
    chosen = []
    for a in args:
        name, _, attn = a.partition("@")
        if name not in MODELS:
            sys.exit("hf.py: unknown model '%s' (hf.py list)" % name)
        chosen += [(m, x) for m, x in cases() if m == name and (not attn or x == attn)]
    return chosen


def main(argv):
    if argv[:1] == ["list"]:
        for m, a in cases():
            print(m, a or "-")
        return 0
    if len(argv) == 2 and argv[0] == "table":
        ok = True
        print(HEADER)
        for m, a in cases():
            path = os.path.join(argv[1], tag_of(m, a) + ".result.json")
            if os.path.exists(path):
                r = json.load(open(path))
                r["pass"] = passes(r)  # the current rule
                ok &= r["pass"]
                print(row(r, m, a))
        return 0 if ok else 1
    if argv[:1] != ["run"]:
        sys.exit(__doc__)
    argv, out = argv[1:], os.path.join(ROOT, "build", "zoo_hf")
    if argv[:1] == ["-o"]:
        out, argv = os.path.abspath(argv[1]), argv[2:]
    qfx = os.environ.get("QFX", os.path.join(ROOT, "build", "tools", "qfx"))
    if not os.access(qfx, os.X_OK):
        sys.exit("hf.py: %s not found: build qfx first (README) or set QFX" % qfx)
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(int(os.environ.get("QFX_ZOO_THREADS", "1")))
    rows, ok = [], True
    for m, a in select(argv):
        tag = tag_of(m, a)
        print("== " + tag, file=sys.stderr, flush=True)
        try:
            model, cal, ev = build_case(m, a)
        except Exception as e:  # a configuration transformers rejects
            r = failed(tag, "building the model: " + short(e))
        else:
            r = measure_or_fail(tag, model, cal, ev, out, qfx)
        rows.append(row(r, m, a))
        print("   " + rows[-1], file=sys.stderr, flush=True)
        ok &= r["pass"]
    print(HEADER)
    print("\n".join(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
