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


@pytest.fixture(scope="session", autouse=True)
def every_encodings_json_follows_the_schema(tmp_path_factory):
    """After the session: every encodings.json the tests wrote validates against
    docs/encodings.schema.json."""
    yield
    import json

    import jsonschema
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "encodings.schema.json").read_text())
    for f in sorted(tmp_path_factory.getbasetemp().rglob("encodings.json")):
        jsonschema.validate(json.loads(f.read_text()), schema, cls=jsonschema.Draft202012Validator)
