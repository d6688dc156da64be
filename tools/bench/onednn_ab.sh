#!/usr/bin/env bash
# One oneDNN against another on the same models: two runtime-only builds (each links
# one oneDNN; two cannot share a process), their `qfx bench --peak` runs alternated
# ROUNDS times, then per model and batch the median over rounds of each build's median
# ms, its fraction of its own measured peak, and B / A.
#   tools/bench/onednn_ab.sh BUILD_A BUILD_B ROUNDS MODEL.onnx... [-- --batch 1,32]
# e.g. A = cmake -B build-rt -DQFX_RUNTIME_ONLY=ON (.venv's oneDNN 3.x),
#      B = cmake -B build-rt26 -DQFX_RUNTIME_ONLY=ON -DQFX_ONEDNN_ROOT=/usr (Debian's 2.6).
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 BUILD_A BUILD_B ROUNDS MODEL.onnx... [-- BENCH_OPTIONS]" >&2; exit 2; }
a=$1; b=$2; rounds=$3; shift 3
models=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do models+=("$1"); shift; done
[ $# -gt 0 ] && shift
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for build in "$a" "$b"; do "$build/tools/qfx" --version; done
for r in $(seq "$rounds"); do
  for side in A B; do
    build=$a; [ $side = B ] && build=$b
    "$build/tools/qfx" bench "${models[@]}" --backends onednn --peak "$@" | sed "s/^/$side /" >> "$tmp/runs"
  done
done
grep "^[AB] peak" "$tmp/runs"
# Rows: "SIDE | model | batch | backend | median | iqr | img/s | speed | GOP/s | of peak |"
awk -F'|' '
  function median(list,   n, v, i, j, t) { n = split(list, v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
                                           return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
  /^[AB] \| / && $3 ~ /[0-9]/ { side = substr($1, 1, 1); key = $2 "|" $3; keys[key] = 1
                               ms[side, key] = ms[side, key] " " $5; pk[side, key] = pk[side, key] " " $10 + 0 }
  END { for (k in keys) { split(k, p, "|"); ma = median(ms["A", k]); mb = median(ms["B", k])
          gsub(/ /, "", p[1]); gsub(/ /, "", p[2]); printf "| %s | %s | %.2f | %.0f %% | %.2f | %.0f %% | %.2f |\n", p[1], p[2], ma, median(pk["A", k]), mb, median(pk["B", k]), mb / ma } }
' "$tmp/runs" > "$tmp/table"
echo "| model | batch | A ms | A of peak | B ms | B of peak | B / A |"
echo "|---|---:|---:|---:|---:|---:|---:|"
sort -t'|' -k2,2 -k3,3n "$tmp/table"
