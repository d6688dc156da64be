"""Fixtures of the Python package's tests: the build's fixture folder and qfx binary
(set by CTest: QFX_FIXTURES, QFX_CLI)."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return Path(os.environ["QFX_FIXTURES"])


@pytest.fixture(scope="session")
def cli() -> str:
    return os.environ["QFX_CLI"]


# A quick run of the default job: fewer calibration and evaluation images.
QUICK = {"calibration.num_samples": 128, "evaluation.num_samples": 512, "evaluation.sqnr_samples": 64,
         "evaluation.reference_check": 512}
