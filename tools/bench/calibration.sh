#!/usr/bin/env bash
# Calibration benchmark, side by side in one run: qfx ptq (histogram observers,
# calibration on the runtime) against PyTorch 1.13's prepare_fx (default onednn
# qconfig, HistogramObserver) on torchvision resnet18 at 224x224, 2 threads; and
# qfx's peak memory with 512 and with 5,120 calibration images.
#   tools/bench/calibration.sh [BUILD_DIR] [SMALL] [LARGE]
set -euo pipefail
build=${1:-build}; small=${2:-512}; large=${3:-5120}
src=$(cd "$(dirname "$0")/../.." && pwd)
qfx="$(cd "$build" && pwd)/tools/qfx"; fixtures="$(cd "$build/fixtures" && pwd)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=2
# A folder of $large JPEGs (links to the 48 fixture images, under distinct names).
mkdir -p "$tmp/images"
imgs=("$fixtures"/images/imagenet_like/*.jpg)
for ((i = 0; i < large; i++)); do ln -s "${imgs[i % ${#imgs[@]}]}" "$tmp/images/$(printf %06d $i).jpg"; done
run_qfx() {  # N -> "images_per_s peak_rss_mb"
  /usr/bin/time -f "%M" -o "$tmp/rss" "$qfx" ptq "$src/configs/examples/resnet18_ptq.yaml" \
    --set "calibration.data.images=$tmp/images" --set calibration.num_samples="$1" --set calibration.batch_size=32 \
    --set qconfig.global.activation="{observer: histogram, algorithm: entropy}" \
    --set evaluation=null --set output.dir="$tmp/out_$1" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
  python3 -c "import json; r = json.load(open('$tmp/out_$1/report.json'))['calibration']; print(r['images_per_s'], $(cat "$tmp/rss") / 1024)"
}
read -r q_small_rate q_small_rss < <(run_qfx "$small")
read -r q_large_rate q_large_rss < <(run_qfx "$large")
pt=$("${QFX_PYTHON:-$src/.venv/bin/python}" "$src/tools/bench/pytorch_calibration.py" "$fixtures/bench/resnet18.pt" --images "$small" --batch 32)
python3 - "$pt" <<PY
import json, sys
pt = json.loads(sys.argv[1])
qs, ql = $q_small_rate, $q_large_rate
ms, ml = $q_small_rss, $q_large_rss
print("calibration, resnet18 224x224, histogram observers, 2 threads, batch 32")
print(f"  PyTorch prepare_fx        {pt['calib_images_per_s']:8.1f} images/s   (eager fp32 forward: {32000 / pt['fp32_ms_per_batch']:.1f} images/s)")
print(f"  qfx on the runtime        {qs:8.1f} images/s   ratio qfx / PyTorch = {qs / pt['calib_images_per_s']:.2f}")
print(f"peak memory of qfx ptq: {ms:.0f} MB with $small images, {ml:.0f} MB with $large ({100 * (ml / ms - 1):+.1f} %); "
      f"{ql:.1f} images/s on $large")
PY
