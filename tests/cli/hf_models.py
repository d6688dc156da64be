"""Hugging Face transformers models as users export them, for tests/cli/hf_test.sh.

    hf_models.py OUT_DIR NAME[:ATTN][:core] ...

For each model (small config, seeded random weights, attn_implementation sdpa or
eager; "timm-NAME": timm's model NAME, random weights, on the 32x32 images): torch.export.export(model, (), kwargs, dynamic_shapes) with a dynamic batch,
as the transformers and torch.export docs show (":core": then
ExportedProgram.run_decompositions(), the Core ATen IR); writes OUT_DIR/TAG.pt2, the inputs
OUT_DIR/TAG.INPUT.npy (32 samples; token ids and a mask whose odd rows end in 4
padding tokens, int64 [32, 16], or images float32 [32, 3, 32, 32]), PyTorch's first
output on them OUT_DIR/TAG.fp32.npy, and OUT_DIR/TAG.yaml (model.inputs with their
keys in reverse order: qfx binds them by name), TAG = NAME_ATTN[_core].
"""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402
from torch.export import Dim, export  # noqa: E402

L = 16
SMALL = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, hidden_size=32)
DECODER = dict(use_cache=False, vocab_size=100, max_position_embeddings=64, **SMALL)


def build(name, attn):
    """The model and its kind ('text' or 'image')."""
    if name == "bert":
        return T.BertModel(T.BertConfig(vocab_size=100, max_position_embeddings=64, attn_implementation=attn, **SMALL)), "text"
    if name == "gpt2":
        c = T.GPT2Config(use_cache=False, vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                         bos_token_id=0, eos_token_id=0, attn_implementation=attn)
        return T.GPT2Model(c), "text"
    if name == "llama":
        return T.LlamaModel(T.LlamaConfig(num_key_value_heads=1, attn_implementation=attn, **DECODER)), "text"
    if name == "vit":
        return T.ViTModel(T.ViTConfig(image_size=32, patch_size=8, attn_implementation=attn, **SMALL)), "image"
    if name.startswith("timm-"):  # a timm model (random weights) taking the images as pixel_values
        import timm

        class Images(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, pixel_values):
                return (self.m(pixel_values),)

        return Images(timm.create_model(name[5:], pretrained=False)), "image"
    raise SystemExit("hf_models.py: unknown model " + name)


def inputs(kind):
    rng = np.random.default_rng(0)
    if kind == "image":
        return {"pixel_values": rng.normal(0, 1, (32, 3, 32, 32)).astype(np.float32)}
    mask = np.ones((32, L), np.int64)
    mask[1::2, L - 4:] = 0
    return {"input_ids": rng.integers(1, 100, (32, L)).astype(np.int64), "attention_mask": mask}


def main(out, specs):
    os.makedirs(out, exist_ok=True)
    for spec in specs:
        name, _, rest = spec.partition(":")
        attn, _, core = rest.partition(":")
        attn = attn or "sdpa"
        tag = name + "_" + attn + ("_core" if core else "")
        torch.manual_seed(0)
        model, kind = build(name, attn)
        model.eval()
        data = inputs(kind)
        batch = Dim("batch", min=1, max=64)
        kw = {k: torch.from_numpy(v[:2]) for k, v in data.items()}
        with torch.no_grad():
            ep = export(model, (), kw, dynamic_shapes={k: {0: batch} for k in data})
            if core:
                ep = ep.run_decompositions()
            ref = model(**{k: torch.from_numpy(v) for k, v in data.items()})[0]
        torch.export.save(ep, os.path.join(out, tag + ".pt2"))
        np.save(os.path.join(out, tag + ".fp32.npy"), ref.numpy())
        lines = ["model:", "  path: %s" % os.path.join(out, tag + ".pt2"), "  inputs:"]
        for k in reversed(list(data)):
            np.save(os.path.join(out, "%s.%s.npy" % (tag, k)), data[k])
            shape = [-1] + list(data[k].shape[1:])
            lines.append("    %s: {shape: %s, dtype: %s}" % (k, shape, data[k].dtype))
        src = "{%s}" % ", ".join("%s: {format: npy, images: %s}" % (k, os.path.join(out, "%s.%s.npy" % (tag, k))) for k in data)
        lines += ["calibration: {data: %s, num_samples: 32, batch_size: 8}" % src,
                  "evaluation: {data: %s, metric: cosine, batch_size: 8, reference_check: 8, sqnr_samples: 0}" % src,
                  "output: {dir: %s, report_html: false}" % os.path.join(out, tag)]
        with open(os.path.join(out, tag + ".yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("ok", tag)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
