#!/usr/bin/env bash
# Data-parallel calibration scaling, measured side by side in one run: qfx ptq's
# calibration images/s with N single-threaded processes (--nproc N) against one
# single-threaded process, on the default config (Fashion-MNIST ResNet fixture).
# Usage: tools/bench/distributed_calibration.sh [SAMPLES] [N]   (defaults 8192, 2)
# Needs a build in build/ (README). Prints one line per run and the ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
SAMPLES="${1:-8192}"; N="${2:-2}"
QFX="${QFX:-build/tools/qfx}"
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
rate() {
  OMP_NUM_THREADS=1 "$QFX" ptq --nproc "$1" --set calibration.num_samples="$SAMPLES" --set evaluation=null \
    --set output.dir="$out/p$1" >/dev/null
  /usr/bin/python3 -c "import json; print(json.load(open('$out/p$1/report.json'))['calibration']['images_per_s'])"
}
r1=$(rate 1); rn=$(rate "$N")
printf 'calibration, %s images, 1 thread per process: 1 process %.0f images/s, %s processes %.0f images/s, ratio %.2f\n' \
  "$SAMPLES" "$r1" "$N" "$rn" "$(/usr/bin/python3 -c "print($rn / $r1)")"
