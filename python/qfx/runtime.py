"""qfx.runtime: run float or int8 ONNX models on qfx's runtime from Python."""

from typing import Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np
import torch

from . import errors
from ._load import load_extension

ArrayLike = Union[np.ndarray, torch.Tensor]


class Model:
    """An ONNX model loaded on one of the runtime's backends.

    ``path``: a float or int8 QDQ ONNX model (qfx's ``model_int8.onnx``, or any
    model the runtime takes), or the model itself as ``bytes`` (a serialized
    ModelProto, as ``PtqResult.model_bytes()`` gives; its tensors held inside it,
    not in external data files). ``backend``: ``"onednn"`` (oneDNN primitives, then
    vectorised kernels, then the reference kernels), ``"reference"`` (the kernels
    that define the target arithmetic), ``"cuda"`` where built, or one a plug-in
    registers. Raises :class:`qfx.IoError` for a missing or malformed file,
    :class:`qfx.ConfigError` for an unknown backend,
    :class:`qfx.UnsupportedOpError` for an op the runtime lacks."""

    def __init__(self, path, backend: str = "onednn"):
        if isinstance(path, (bytes, bytearray, memoryview)):
            self._m = load_extension().RuntimeModel.from_bytes(bytes(path), backend)
        else:
            self._m = load_extension().RuntimeModel(str(path), backend)

    @property
    def inputs(self) -> List[Tuple[str, str, List[int]]]:
        """The graph's inputs as (name, dtype, shape); -1 marks a dynamic dimension."""
        return [tuple(i) for i in self._m.inputs()]

    @property
    def outputs(self) -> List[Tuple[str, str, List[int]]]:
        """The graph's outputs as (name, dtype, shape)."""
        return [tuple(o) for o in self._m.outputs()]

    @property
    def backend(self) -> str:
        """The backend the model was planned for."""
        return self._m.backend()

    def _named(self, args, kwargs) -> Dict[str, ArrayLike]:
        names = [i[0] for i in self._m.inputs()]
        if len(args) == 1 and isinstance(args[0], Mapping) and not kwargs:
            return dict(args[0])
        if len(args) > len(names):
            raise errors.ArgumentError(f"Model.run: {len(args)} inputs given, the model has {len(names)} ({', '.join(names)})")
        named = dict(zip(names, args))
        named.update(kwargs)
        return named

    def run(self, *args, **kwargs) -> Dict[str, ArrayLike]:
        """Runs the model once and returns {output name: value}.

        Inputs by position (the model's input order), by keyword, or as one dict
        {name: value}; each a NumPy array or a CPU ``torch.Tensor`` with the
        model's shape (float32; int64 / int32 for integer inputs). Contiguous
        float32 / int32 / int64 inputs are read in place, without a copy.
        Outputs are torch tensors when any input was one, else NumPy arrays; both
        share the runtime's output memory (no copy). Raises :class:`qfx.DataError`
        for inputs that do not fit the model (names, shapes, dtypes, a CUDA
        tensor), :class:`qfx.ExecutionError` when a kernel fails."""
        named = self._named(args, kwargs)
        as_numpy = not any(isinstance(v, torch.Tensor) for v in named.values())
        tensors = {k: v if isinstance(v, torch.Tensor) else torch.from_numpy(np.asarray(v)) for k, v in named.items()}
        out = self._m.run(tensors)
        return {k: v.numpy() for k, v in out.items()} if as_numpy else out

    __call__ = run

    def explain(self) -> List[dict]:
        """Which implementation runs each node of the last planned input shape, and
        which faster ones declined with their reasons (``qfx run --explain``):
        dicts with node, op, backend, impl, dtype, declined [(impl, reason)],
        folded. Empty before the first run."""
        return list(self._m.kernel_report())

    def int8_ops(self) -> int:
        """Ops that run on integer kernels after QDQ matching."""
        return self._m.int8_ops()

    def float_fallbacks(self) -> List[str]:
        """QDQ groups left in float, each with its reason."""
        return list(self._m.float_fallbacks())

    def value_names(self) -> List[str]:
        """Every value a tap can observe."""
        return list(self._m.value_names())

    def set_taps(self, names: Sequence[str], kind: str = "minmax", bins: int = 2048) -> None:
        """Observes the values ``names`` in every later run: ``kind`` ``"minmax"``,
        ``"per_channel_minmax"`` (axis 1) or ``"histogram"`` (``bins`` bins that
        grow with the data, as calibration's histogram observer). Raises
        :class:`qfx.ArgumentError` for another kind, :class:`qfx.DataError` for a
        name the model does not have."""
        self._m.set_taps(list(names), kind, int(bins))

    def taps(self) -> Dict[str, dict]:
        """The tapped statistics since :meth:`set_taps`: {name: {min, max, count,
        and channel_min / channel_max or histogram / histogram_lo / bin_width}}."""
        return dict(self._m.taps())

    def reset_taps(self) -> None:
        """Forgets what the taps saw, keeping them."""
        self._m.reset_taps()
