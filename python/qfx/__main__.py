"""The ``qfx`` command of a pip-installed qfx: runs the C++ ``qfx`` binary the
package carries (``python -m qfx ptq config.yaml`` works the same)."""

import os
import sys
from pathlib import Path


def _binary() -> str:
    here = Path(__file__).absolute().parent  # not resolved: in a build tree the sources are links
    for candidate in (here / "bin" / "qfx", here.parent.parent / "tools" / "qfx"):  # installed; a build tree
        if candidate.is_file():
            return str(candidate)
    raise SystemExit(f"qfx: the qfx binary is in neither {here / 'bin'} nor a build tree beside {here}")


def main() -> None:
    """Replaces this process with ``qfx`` and the same arguments (exit code and
    signals are the binary's own)."""
    exe = _binary()
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
