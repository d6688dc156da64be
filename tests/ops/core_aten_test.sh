#!/usr/bin/env bash
# The generated Core ATen op test: core_aten_cases.py writes one-op torch.export
# programs (every Core ATen operator qfx is tried on, several dtypes and ranks, a
# dynamic batch), qfx_op_check ($1) runs each through qfx's float path and compares
# with PyTorch; the ops docs/fx.md lists ($2) must be exactly those that pass.
# $3 (optional): where to keep the per-op results (JSON).
set -euo pipefail
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"${QFX_PYTHON:-python3}" "$(dirname "$0")/core_aten_cases.py" "$tmp/cases"
"$1" "$tmp/cases" "$2" "${3:-$tmp/results.json}"
