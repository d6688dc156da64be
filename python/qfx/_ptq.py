"""qfx.ptq: the PTQ pipeline of ``qfx ptq`` as a Python call."""

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import List, Mapping, Optional, Union

import yaml

from . import errors
from ._load import load_extension


@dataclasses.dataclass
class LayerSqnr:
    """One quantized activation against its fp32 value on the evaluation data.

    ``sqnr_db_fakequant``: signal-to-quantization-noise ratio in dB with Q/DQ
    simulated on the runtime; ``sqnr_db_int8``: the deployed int8 kernels, in dB,
    or None where the value is not an int8 tensor in the deployed model;
    ``value``: the tensor's name in ``model_int8.onnx``. The fake-quant error
    split: ``sqnr_db_own`` is the layer's own error (dB; every quantized value
    before it replaced by its fp32 value, quantized), ``sqnr_db_inherited`` the error its
    quantized inputs bring from upstream (dB; None when nothing is inherited, as
    for a first layer); both None where the split was not measured."""

    node: str
    sqnr_db_fakequant: float
    sqnr_db_int8: Optional[float]
    value: str
    sqnr_db_own: Optional[float] = None
    sqnr_db_inherited: Optional[float] = None

    @property
    def error_mostly_inherited(self) -> Optional[bool]:
        """True where more of the layer's error comes from upstream than from the
        layer itself (fix the layers before it); None where not measured."""
        if self.sqnr_db_own is None:
            return None
        return self.sqnr_db_inherited is not None and self.sqnr_db_inherited < self.sqnr_db_own


@dataclasses.dataclass
class PtqResult:
    """What one PTQ run wrote and measured (the content of report.json).

    Paths are absolute. ``metrics`` holds the evaluation's numbers as report.json
    names them (``top1_fp32`` / ``top1_int8`` fractions in [0, 1] for metric
    top1, ``cosine_int8_vs_fp32``, ``sqnr_db_int8_vs_fp32`` in dB,
    ``fp32_ms_per_image`` / ``int8_ms_per_image`` in milliseconds, ...); empty
    without an evaluation section. ``layers``: per-layer SQNR, worst first.
    ``range_advice``: activation ranges that waste codes, each a dict with node,
    problem, detail and fix (docs/pipelines.md, "Ranges that waste codes").
    ``report``: report.json as a dict."""

    output_dir: Path
    model_int8: Path
    encodings: Path
    report_json: Path
    files: List[Path]
    report: dict
    metrics: dict
    layers: List[LayerSqnr]
    range_advice: List[dict]
    seconds: float
    reference_images: int
    reference_identical: int

    def model_bytes(self) -> bytes:
        """The int8 model, ``model_int8.onnx``, as bytes (a serialized ONNX
        ModelProto, for ``onnx.load_from_string``, ``onnxruntime.InferenceSession``
        or ``qfx.runtime.Model``). Raises FileNotFoundError when the file was
        moved or deleted since the run."""
        return self.model_int8.read_bytes()

    @property
    def report_html(self) -> Optional[Path]:
        """report.html, where the run wrote one."""
        p = self.output_dir / "report.html"
        return p if p in self.files else None


def _override_strings(overrides) -> List[str]:
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        out = []
        for k, v in overrides.items():
            out.append(f"{k}={v if isinstance(v, str) else json.dumps(v)}")  # JSON is YAML's flow style
        return out
    if isinstance(overrides, (str, bytes)):
        raise errors.ArgumentError("qfx.ptq: overrides must be a list of 'key=value' strings or a dict, not one string")
    return [str(o) for o in overrides]


def _console_progress():
    """Progress on stderr: one line redrawn on a terminal, else one line per stage
    at its end (a log file gets no partial lines); notes on stdout."""
    tty = sys.stderr.isatty()

    def progress(stage, done, total, extra):
        finished = total > 0 and done >= total
        if not tty and not finished:
            return
        line = f"{stage}: {done}/{total}" if total > 0 else f"{stage}: {done}"
        sys.stderr.write(("\r" if tty else "") + line + (f"  {extra}" if extra else "") + ("\n" if finished else ""))
        sys.stderr.flush()

    def info(line):
        print(line, flush=True)

    return progress, info


def _result(raw: dict) -> PtqResult:
    out_dir = Path(raw["output_dir"]).resolve()
    files = [Path(f).resolve() for f in raw["outputs"]]
    report_path = out_dir / "report.json"
    with open(report_path) as f:
        report = json.load(f)
    evaluation = report.get("evaluation", {})
    metrics = {k: v for k, v in evaluation.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    layers = [LayerSqnr(node=l["node"], sqnr_db_fakequant=l["sqnr_db_fakequant"], sqnr_db_int8=l.get("sqnr_db_int8"),
                        value=l.get("value", ""), sqnr_db_own=l.get("sqnr_db_own"),
                        sqnr_db_inherited=l.get("sqnr_db_inherited"))
              for l in report.get("per_layer_sqnr", {}).get("layers", [])]
    return PtqResult(output_dir=out_dir, model_int8=out_dir / "model_int8.onnx", encodings=out_dir / "encodings.json",
                     report_json=report_path, files=files, report=report, metrics=metrics, layers=layers,
                     range_advice=report.get("range_advice", []),
                     seconds=raw["seconds"], reference_images=raw["reference_images"],
                     reference_identical=raw["reference_identical"])


def ptq(config: Union[None, str, os.PathLike, Mapping] = None, overrides=None, *, progress: bool = True) -> PtqResult:
    """Post-training quantization, as ``qfx ptq CONFIG --set KEY=VALUE ...`` runs it.

    ``config``: a YAML file (str or path; relative paths in it are relative to its
    folder), a dict with the same keys (relative paths relative to the current
    directory), or None for the shipped default job (configs/ptq/default.yaml).
    ``overrides``: ``["calibration.num_samples=64", ...]`` or
    ``{"calibration.num_samples": 64, ...}``, applied before the config is read.
    ``progress``: print progress to stderr and the pipeline's notes to stdout.

    Returns a :class:`PtqResult`. Raises :class:`qfx.ConfigError` (bad config,
    naming ``file:line:column`` and the key), :class:`qfx.IoError`,
    :class:`qfx.DataError`, :class:`qfx.TraceError`,
    :class:`qfx.UnsupportedOpError`, ... with the C++ message; nothing is written
    when one is raised. :class:`qfx.ReferenceCheckError` (its ``result`` holds
    the written run) when int8 outputs that must equal the reference backend's
    do not."""
    C = load_extension()
    if config is None:
        path, text = C.find_config("ptq/default.yaml"), ""
    elif isinstance(config, Mapping):
        path, text = os.path.join(os.getcwd(), "<config dict>"), yaml.safe_dump(dict(config), sort_keys=False)
    elif isinstance(config, (str, os.PathLike)):
        path, text = os.fspath(config), ""
    else:
        raise errors.ArgumentError(f"qfx.ptq: config must be a path, a dict or None, not {type(config).__name__}")
    prog, info = _console_progress() if progress else (None, None)
    raw = C.ptq(path, text, _override_strings(overrides), prog, info)
    result = _result(raw)
    if result.reference_identical != result.reference_images and raw["reference_exact_expected"]:
        raise errors.ReferenceCheckError(
            f"{result.reference_images - result.reference_identical} of {result.reference_images} int8 outputs differ "
            f"from the reference backend's", result)
    return result
