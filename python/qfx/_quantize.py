"""qfx.quantize: PTQ of an in-memory PyTorch model, captured with torch.export."""

import os
import tempfile
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

import numpy as np
import torch

from . import errors
from ._ptq import PtqResult, ptq


def _export(model, example_inputs) -> torch.export.ExportedProgram:
    if isinstance(model, torch.export.ExportedProgram):
        return model
    if not isinstance(model, torch.nn.Module):
        raise errors.ArgumentError(f"qfx.quantize: model must be a torch.nn.Module or an ExportedProgram, "
                                   f"not {type(model).__name__}")
    model = model.eval()
    dims = tuple({0: torch.export.Dim.AUTO} for _ in example_inputs)  # the batch stays dynamic where it can
    try:
        return torch.export.export(model, tuple(example_inputs), dynamic_shapes=dims)
    except Exception as e:  # torch.export's own error types vary between torch versions
        raise errors.TraceError(f"qfx.quantize: torch.export.export failed on {type(model).__name__}: {e}") from e


def _user_inputs(ep) -> list:
    from torch.export.graph_signature import InputKind
    return [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]


def _as_tuple(item, n_inputs) -> tuple:
    if isinstance(item, torch.Tensor) or isinstance(item, np.ndarray):
        item = (item,)
    item = tuple(item)
    if len(item) < n_inputs:
        raise errors.DataError(f"qfx.quantize: a calibration item has {len(item)} tensors, the model takes {n_inputs}")
    return item[:n_inputs]  # (inputs..., labels) from a DataLoader: the inputs


def _collect(data: Iterable, n_inputs: int, num_samples: Optional[int]) -> list:
    """The calibration tensors per input, concatenated along the batch, up to num_samples."""
    parts = [[] for _ in range(n_inputs)]
    have = 0
    for item in data:
        t = [torch.as_tensor(x).detach().cpu() for x in _as_tuple(item, n_inputs)]
        for k in range(n_inputs):
            parts[k].append(t[k])
        have += t[0].shape[0] if t[0].dim() > 0 else 1
        if num_samples is not None and have >= num_samples:
            break
    if have == 0:
        raise errors.DataError("qfx.quantize: calibration_data yielded no samples")
    out = []
    for p in parts:
        x = torch.cat(p) if p[0].dim() > 0 else torch.stack(p)
        out.append(x[:num_samples] if num_samples is not None else x)
    return out


def _npy(t: torch.Tensor, path: Path) -> str:
    a = t.numpy()
    if a.dtype not in (np.int64, np.int32):
        a = a.astype(np.float32)
    np.save(path, a)
    return str(path)


def _data_section(tensors, names, folder: Path, stem: str) -> dict:
    files = [_npy(t, folder / f"{stem}_{k}.npy") for k, t in enumerate(tensors)]
    if len(files) == 1:
        return {"format": "npy", "images": files[0]}
    return {n: {"format": "npy", "images": f} for n, f in zip(names, files)}


def quantize(model: Union[torch.nn.Module, "torch.export.ExportedProgram"], example_inputs: Sequence,
             calibration_data: Iterable, target: str = "onednn", *, output_dir: Union[str, os.PathLike] = "qfx_out",
             num_samples: Optional[int] = 512, evaluation_data: Optional[Iterable] = None,
             progress: bool = True, **qconfig) -> PtqResult:
    """Quantizes an in-memory model to an int8 QDQ ONNX model for ``target``.

    ``model``: a ``torch.nn.Module`` (captured with ``torch.export.export`` on
    ``example_inputs``, batch dimension dynamic where the model allows it) or an
    ``ExportedProgram``. ``example_inputs``: a tuple of tensors, batch first.
    ``calibration_data``: any iterable of tensors or tuples (a ``DataLoader``);
    of a tuple, the first ``len(example_inputs)`` items are the inputs (labels
    after them are ignored); up to ``num_samples`` samples are used (None: all).
    ``target``: a backend name (``onednn``, ``reference``, ``tflite_like``, ...)
    or a target YAML path. ``evaluation_data``: optional, as calibration_data:
    the int8 model is then compared with the float one on it (metric cosine).
    ``qconfig``: the ``qconfig.global`` keys, e.g.
    ``activation={"observer": "histogram", "algorithm": "mse"}``,
    ``weight={"granularity": "per_channel"}``.
    ``output_dir``: where model_int8.onnx, encodings.json and report.json go
    (created; files there of the same names are replaced only when the run
    succeeds).

    Returns the :class:`qfx.PtqResult` (``result.model_int8`` is the model's
    path). Raises :class:`qfx.TraceError` when torch.export fails,
    :class:`qfx.DataError` for calibration data that does not fit, and the
    errors of :func:`qfx.ptq`."""
    ep = _export(model, example_inputs)
    names = _user_inputs(ep)
    if len(names) != len(example_inputs):
        raise errors.ArgumentError(f"qfx.quantize: the program takes {len(names)} inputs ({', '.join(names)}), "
                                   f"example_inputs has {len(example_inputs)}")
    with tempfile.TemporaryDirectory(prefix="qfx_quantize_") as tmp:
        folder = Path(tmp)
        model_path = folder / "model.pt2"
        torch.export.save(ep, str(model_path))
        calib = _collect(calibration_data, len(names), num_samples)
        config = {"model": {"path": str(model_path)}, "backend": target,
                  "calibration": {"data": _data_section(calib, names, folder, "calibration"),
                                  "num_samples": int(calib[0].shape[0]), "batch_size": min(64, int(calib[0].shape[0]))},
                  "output": {"dir": str(Path(output_dir).resolve())}}
        if len(names) == 1:
            config["model"]["input_shape"] = [-1] + list(example_inputs[0].shape[1:])
        else:
            config["model"]["inputs"] = {
                n: {"shape": [-1] + list(x.shape[1:]),
                    "dtype": {torch.int64: "int64", torch.int32: "int32"}.get(x.dtype, "float32")}
                for n, x in zip(names, example_inputs)}
        if qconfig:
            config["qconfig"] = {"global": qconfig}
        if evaluation_data is not None:
            ev = _collect(evaluation_data, len(names), None)
            config["evaluation"] = {"data": _data_section(ev, names, folder, "evaluation"), "metric": "cosine",
                                    "num_samples": 0}
        return ptq(config, progress=progress)
