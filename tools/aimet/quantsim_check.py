"""Checks a qfx output folder's AIMET pair with AIMET itself.

Loads ``model_aimet.onnx`` into aimet-onnx's ``QuantizationSimModel`` and its
``model_aimet.encodings`` with ``load_encodings_to_sim`` (settings taken from the
file: strict=False; quantizers without an encoding disabled), checks that only
encoded tensors are quantized (format 2.0.0 lets AIMET drop an encoding equal to its
producer's input's, a reshape's: counted as "delegated"), runs the simulation on a batch of inputs and
compares it with ONNX Runtime running ``model_int8.onnx`` (the QDQ model the pair
was written from) with its graph optimizations off, so that each DequantizeLinear
computes as ONNX defines it (ONNX Runtime otherwise fuses block-wise int4 weights into
MatMulNBits, which may quantize the activations). Prints one JSON line:

  {"encodings": N, "quantizers_enabled": N, "delegated": N, "max_abs_diff": D, "output_step": S,
   "identical": F, "argmax_agree": F}

``output_step``: the scale of the DequantizeLinear that writes the first output
(0 when the output is float); ``identical``: the fraction of output values that are
bit-identical. Exit 1 when a quantizer without an encoding is enabled.

Usage: quantsim_check.py OUTPUT_DIR INPUTS.npy
"""

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort


def entries(enc: dict) -> list:
    if enc["version"] == "1.0.0":
        return enc["activation_encodings"] + enc["param_encodings"]
    return enc["encodings"]


def output_step(model: onnx.ModelProto) -> float:
    out = model.graph.output[0].name
    inits = {t.name: t for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    while out in producer and producer[out].op_type in ("Identity", "Reshape", "Flatten"):
        out = producer[out].input[0]
    n = producer.get(out)
    if n is not None and n.op_type == "DequantizeLinear" and n.input[1] in inits:
        return float(onnx.numpy_helper.to_array(inits[n.input[1]]).max())
    return 0.0


def main(out_dir: str, inputs: str) -> int:
    from aimet_onnx.quantsim import QuantizationSimModel, load_encodings_to_sim

    folder = Path(out_dir)
    enc = json.loads((folder / "model_aimet.encodings").read_text())
    model = onnx.load(str(folder / "model_aimet.onnx"))
    sim = QuantizationSimModel(model)  # every setting is replaced by the encodings below
    load_encodings_to_sim(sim, enc, strict=False)
    names = {e["name"] for e in entries(enc)}
    enabled = {k for k, q in sim.qc_quantize_op_dict.items() if q.enabled}
    x = np.load(inputs)
    feed = {model.graph.input[0].name: x}
    a = sim.session.run(None, feed)[0]
    int8 = onnx.load(str(folder / "model_int8.onnx"))
    plain = ort.SessionOptions()  # ONNX's semantics: no fusion of DequantizeLinear into approximate kernels
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    b = ort.InferenceSession(int8.SerializeToString(), plain, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    summary = {"encodings": len(names), "quantizers_enabled": len(enabled), "delegated": len(names - enabled),
               "max_abs_diff": float(np.abs(a.astype(np.float64) - b).max()), "output_step": output_step(int8),
               "identical": float(np.mean(a == b)),
               "argmax_agree": float(np.mean(a.reshape(len(x), -1).argmax(1) == b.reshape(len(x), -1).argmax(1)))}
    print(json.dumps(summary))
    if not enabled <= names:
        print("quantizers without an encoding:", sorted(enabled - names)[:10])
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
