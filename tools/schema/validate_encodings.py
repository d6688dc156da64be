"""Validates qfx encodings.json files against docs/encodings.schema.json (JSON Schema
2020-12, format version 1). Prints "ok N" for N valid files, or each file's first
error with its path inside the document, and exits 1.

Usage: validate_encodings.py FILE_OR_FOLDER...   (a folder: every encodings.json under it)
"""

import json
import sys
from pathlib import Path

import jsonschema

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "encodings.schema.json"


def files(args):
    for a in map(Path, args):
        yield from (sorted(a.rglob("encodings.json")) if a.is_dir() else [a])


def main(args) -> int:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    bad, n = 0, 0
    for f in files(args):
        n += 1
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            bad += 1
            print(f"{f}: not a readable JSON file: {e}")
            continue
        err = next(iter(sorted(validator.iter_errors(doc), key=lambda e: list(e.path))), None)
        if err is not None:
            bad += 1
            print(f"{f}: {'/'.join(map(str, err.absolute_path)) or '(top)'}: {err.message}")
    if n == 0:
        print("no encodings.json found in", " ".join(args))
        return 1
    if bad:
        return 1
    print("ok", n)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
