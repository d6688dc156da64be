"""ONNX Runtime on a model with block-wise 4-bit weights, computing in float32.

ONNX Runtime fuses DequantizeLinear(INT4) + MatMul into its MatMulNBits, which by
default quantizes the activations to int8 on the fly (accuracy level 4): level 0
keeps them float32, as qfx's runtime computes. Used by block_weights_test.sh.
"""
import onnxruntime as ort


def run(path, x):
    """The first output of the model at `path` on its first input `x` (a NumPy array)."""
    so = ort.SessionOptions()
    so.add_session_config_entry('session.qdq_matmulnbits_accuracy_level', '0')
    s = ort.InferenceSession(path, so, providers=['CPUExecutionProvider'])
    return s.run(None, {s.get_inputs()[0].name: x})[0]
