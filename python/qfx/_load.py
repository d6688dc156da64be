"""Loads qfx._C after checking that the running torch is the one it was built
against (a libtorch of another version would fail with unresolved symbols, or
worse, load and misbehave)."""

import torch

from . import _build_info


def _release(version):
    return version.split("+")[0]


def load_extension():
    """Returns the qfx._C module. Raises ImportError naming both torch versions
    when the running torch is not the one qfx was built against."""
    built, running = _build_info.TORCH_VERSION, torch.__version__
    if _release(built) != _release(running):
        raise ImportError(
            f"qfx was built against torch {built}, but this Python has torch {running}: install torch=={_release(built)} "
            f"or rebuild qfx in this environment (pip install --no-build-isolation .)")
    from . import _C
    return _C
