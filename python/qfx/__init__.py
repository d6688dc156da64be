"""qfx: quantization toolkit for custom accelerators, from Python.

The engine is qfx's C++ library (the same one the ``qfx`` command runs); this
package is a thin layer over it:

* :func:`qfx.ptq` runs a PTQ config (a YAML file or a dict) as ``qfx ptq`` does;
* :func:`qfx.quantize` quantizes an in-memory ``torch.nn.Module`` or
  ``ExportedProgram`` with calibration data from any iterable (a DataLoader);
* :func:`qfx.prepare_qat` returns a ``torch.nn.Module`` to train in your own loop
  with qfx's fake quantization, and :func:`qfx.convert` its int8 model;
* :class:`qfx.runtime.Model` runs float or int8 ONNX models on the runtime;
* :mod:`qfx.errors` holds the error classes (also importable from ``qfx``),
  each with the ``qfx`` command's exit code for the same failure.

Import torch before or with qfx: the extension uses the libtorch that torch
loads, and refuses (ImportError) a torch other than the one it was built with.
"""

from . import errors, runtime
from ._build_info import QFX_VERSION as __version__
from ._load import load_extension as _load_extension
from ._ptq import LayerSqnr, PtqResult, ptq
from ._qat import ConvertResult, QatModule, convert, prepare_qat
from ._quantize import quantize
from .errors import (ArgumentError, ConfigError, DataError, DistributedError, Error, ExecutionError, InternalError,
                     IoError, ReferenceCheckError, TraceError, UnsupportedOpError)

_load_extension()  # fail at import, with both versions named, under another torch

__all__ = ["ptq", "quantize", "prepare_qat", "convert", "QatModule", "ConvertResult", "runtime", "errors", "PtqResult", "LayerSqnr", "Error", "ConfigError", "TraceError",
           "UnsupportedOpError", "DataError", "IoError", "ExecutionError", "ReferenceCheckError", "DistributedError",
           "ArgumentError", "InternalError"]
