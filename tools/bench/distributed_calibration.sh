#!/usr/bin/env bash
# Data-parallel calibration scaling, measured side by side in one run: qfx ptq's
# calibration images/s with N single-threaded processes (--nproc N) against one
# single-threaded process, on the default config (Fashion-MNIST ResNet fixture).
# The two alternate ROUNDS times (default 3; a shared VM's speed drifts), one line
# per round, then the median ratio.
# Usage: tools/bench/distributed_calibration.sh [SAMPLES] [N]   (defaults 8192, 2)
# Needs a build in build/ (README).
set -euo pipefail
cd "$(dirname "$0")/../.."
SAMPLES="${1:-8192}"; N="${2:-2}"; ROUNDS="${ROUNDS:-3}"
QFX="${QFX:-build/tools/qfx}"
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
rate() {
  OMP_NUM_THREADS=1 "$QFX" ptq --nproc "$1" --set calibration.num_samples="$SAMPLES" --set evaluation=null \
    --set output.dir="$out/p$1" >/dev/null 2>&1
  "${QFX_PYTHON:-.venv/bin/python}" -c "import json; print(json.load(open('$out/p$1/report.json'))['calibration']['images_per_s'])"
  rm -rf "$out/p$1"
}
ratios=()
for round in $(seq "$ROUNDS"); do
  r1=$(rate 1); rn=$(rate "$N")
  ratio=$("${QFX_PYTHON:-.venv/bin/python}" -c "print(f'{$rn / $r1:.2f}')")
  ratios+=("$ratio")
  printf 'round %s: calibration, %s images, 1 thread per process: 1 process %.0f images/s, %s processes %.0f images/s, ratio %s\n' \
    "$round" "$SAMPLES" "$r1" "$N" "$rn" "$ratio"
done
printf 'median ratio over %s rounds: %s\n' "$ROUNDS" "$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (ROUNDS + 1) / 2 ))p")"
