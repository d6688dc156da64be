"""qfx.prepare_qat / qfx.convert: QAT in a Python training loop over qfx's C++ graph."""

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import yaml

from . import errors
from ._load import load_extension
from ._quantize import _export


def _as_parameter(t: torch.Tensor) -> torch.nn.Parameter:
    """The C++ parameter itself, typed as a Parameter (no copy: autograd, the
    optimizer and the C++ graph all see one tensor)."""
    if not isinstance(t, torch.nn.Parameter):
        t.__class__ = torch.nn.Parameter
    return t


class QatModule(torch.nn.Module):
    """A model prepared for quantization-aware training by qfx (``prepare_qat_fx``):
    fake quantization as the target will compute it, batch norm folded into the
    convolutions as in deployment.

    Train it like any ``torch.nn.Module``: ``parameters()`` are the tensors qfx's
    C++ graph computes with (``torch.optim`` updates them in place), ``forward``
    runs the graph with autograd, ``train()`` / ``eval()`` switch batch-norm and
    observer behaviour. ``.to(device)`` moves the graph (CPU, or CUDA where libtorch
    has it). :func:`qfx.convert` gives the int8 model. Build it with
    :func:`qfx.prepare_qat`."""

    def __init__(self, graph, input_shapes):
        super().__init__()
        self._graph = graph
        self._input_shapes = input_shapes
        self._register()

    def _register(self):
        self._parameters.clear()
        self._buffers.clear()
        for name, t in self._graph.named_parameters():
            self._parameters[name] = _as_parameter(t)  # dotted names: the C++ module paths
        for name, t in self._graph.named_buffers():
            self._buffers[name] = t

    def forward(self, *inputs: torch.Tensor):
        """Runs the prepared graph on ``inputs`` (the model's inputs, in order) and
        returns its output (a tensor, or a tuple of them). Raises
        :class:`qfx.ExecutionError` naming the node that failed."""
        return self._graph.forward(list(inputs))

    def train(self, mode: bool = True):
        """Train (batch statistics, observers on where enabled) or eval mode, in
        the C++ graph and here."""
        self._graph.train(bool(mode))
        return super().train(mode)

    def _apply(self, fn, recurse=True):
        # Device and dtype moves go through the C++ module, which moves its tensors in
        # place; the registered tensors are the same objects afterwards.
        probe = fn(torch.zeros(1))
        if probe.dtype != torch.float32:
            raise errors.ArgumentError("QatModule: parameters stay float32 (fake quantization computes in float32)")
        self._graph.to(str(probe.device))
        self._register()
        return self

    def freeze_bn_stats(self) -> None:
        """Batch norm stops updating its running statistics and folds with them
        (the QAT schedule's ``freeze_bn_after``)."""
        self._graph.freeze_bn_stats()

    def enable_observer(self, on: bool = True) -> None:
        """Observers update the ranges (True) or keep them (False: the schedule's
        ``disable_observer_after``)."""
        self._graph.enable_observer(bool(on))

    def disable_observer(self) -> None:
        """Same as ``enable_observer(False)``."""
        self._graph.enable_observer(False)

    def enable_fake_quant(self, on: bool = True) -> None:
        """Values are fake-quantized (True) or pass through in float (False)."""
        self._graph.enable_fake_quant(bool(on))

    def set_quant_state(self, state: str) -> int:
        """Every FakeQuantize to ``"calibration"`` (observe only), ``"fake_quant"``
        (observe and quantize) or ``"float"`` (neither); returns how many were set
        (Horizon's calibration / QAT / validation states)."""
        return self._graph.set_quant_state(state)

    @property
    def code(self) -> str:
        """The prepared graph as readable Python code (torch.fx's ``gm.code``)."""
        return self._graph.code()


def prepare_qat(model: Union[torch.nn.Module, "torch.export.ExportedProgram", str, os.PathLike],
                example_inputs: Sequence[torch.Tensor], target: str = "onednn",
                qconfig: Optional[Mapping] = None) -> QatModule:
    """Prepares ``model`` for QAT on ``target`` and returns a trainable
    :class:`QatModule`.

    ``model``: a ``torch.nn.Module`` (captured with ``torch.export.export`` on
    ``example_inputs``, batch dimension dynamic where it can be), an
    ``ExportedProgram``, or a model file qfx reads (TorchScript ``.pt``, ``.pt2``).
    ``target``: a backend name or target YAML. ``qconfig``: the ``qconfig``
    section of a qfx config as a dict (``{"global": {"activation": {...},
    "weight": {"bits": 4}}}``); None: the default mapping. The module starts in
    train mode. Raises :class:`qfx.TraceError`, :class:`qfx.ConfigError` (a bad
    qconfig or target, naming the key) or :class:`qfx.UnsupportedOpError`."""
    C = load_extension()
    shapes = [[-1] + list(x.shape[1:]) for x in example_inputs]
    with tempfile.TemporaryDirectory(prefix="qfx_qat_") as tmp:
        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
        else:
            path = os.path.join(tmp, "model.pt2")
            torch.export.save(_export(model, example_inputs), path)
        qconfig_file = ""
        if qconfig is not None:
            qconfig_file = os.path.join(tmp, "qconfig.yaml")
            with open(qconfig_file, "w") as f:
                yaml.safe_dump({"qconfig": dict(qconfig)}, f, sort_keys=False)
        graph = C.QatModel(path, target, qconfig_file, shapes)
    for w in graph.warnings:
        print(f"qfx: warning: {w}", flush=True)
    module = QatModule(graph, shapes)
    module.train()
    return module


@dataclasses.dataclass
class ConvertResult:
    """The int8 model :func:`qfx.convert` wrote: ``model_int8`` (QDQ ONNX),
    ``encodings`` (encodings.json), and ``float_ops``, the ops left in float with
    the reason of each."""

    model_int8: Path
    encodings: Path
    float_ops: List[str]


def convert(module: QatModule, output_dir: Union[str, os.PathLike] = "qfx_out") -> ConvertResult:
    """Converts a trained :class:`QatModule` to the int8 QDQ ONNX model and its
    encodings in ``output_dir`` (created), as ``qfx qat`` does after training:
    the current ranges frozen, batch norm folded from its running statistics,
    weights stored as integer codes, the target's arithmetic in the model's
    metadata. ``module`` is not changed (training can go on). Run the result with
    :class:`qfx.runtime.Model`. Raises :class:`qfx.UnsupportedOpError` for what
    ONNX cannot express, :class:`qfx.IoError` for an unwritable folder."""
    if not isinstance(module, QatModule):
        raise errors.ArgumentError(f"qfx.convert: expected the QatModule qfx.prepare_qat returned, not {type(module).__name__}")
    out = module._graph.convert(str(Path(output_dir).resolve()), module._input_shapes)
    return ConvertResult(model_int8=Path(out["model_int8"]), encodings=Path(out["encodings"]),
                         float_ops=list(out["float_ops"]))
