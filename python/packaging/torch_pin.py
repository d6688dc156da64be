"""scikit-build-core metadata provider: the wheel requires the torch it is built
against (qfx._C links that libtorch), plus the package's pure-Python needs."""

import re


def dynamic_metadata(settings, project):
    """{"dependencies": [torch==<the build environment's torch release>, numpy, pyyaml]}."""
    import torch  # the build environment's torch: pip install --no-build-isolation .

    release = re.match(r"[0-9.]+", torch.__version__).group(0).rstrip(".")
    return {"dependencies": [f"torch=={release}", "numpy", "pyyaml"]}
