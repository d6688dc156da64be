#!/usr/bin/env bash
# Data-parallel runs on localhost (c10d Gloo): qfx ptq with 2 and 4 processes writes
# the single-process run's artifacts byte for byte; qfx qat with 2 x 32 matches
# 1 x 64 after 20 steps; a killed rank stops the job with one clear error and no output.
# Needs: $QFX (the binary), $PY with torch (fixture export dependency).
set -u
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check.sh"
export QFX_DIST_TIMEOUT=30

ptq_args=(--set calibration.num_samples=512 --set evaluation.num_samples=200 --set evaluation.reference_check=0
          --set evaluation.sqnr_samples=0)
for n in 1 2 4; do
  check "qfx ptq --nproc $n runs" 0 "wrote model_int8.onnx" -- env -u OMP_NUM_THREADS "$QFX" ptq --nproc $n "${ptq_args[@]}" --set output.dir="$tmp/ptq$n"
done
for n in 2 4; do
  check "qfx ptq --nproc $n: model_int8.onnx and encodings.json byte-identical to one process" 0 "^identical$" -- bash -c \
    "cmp -s '$tmp/ptq1/model_int8.onnx' '$tmp/ptq$n/model_int8.onnx' && cmp -s '$tmp/ptq1/encodings.json' '$tmp/ptq$n/encodings.json' && echo identical || echo different"
done
check "qfx ptq --nproc 4: report.json says 4 processes" 0 "^4$" -- $PY -c \
  "import json; print(json.load(open('$tmp/ptq4/report.json'))['calibration']['processes'])"
check "qfx ptq --nproc 4: the ranks share the CPUs ($(nproc) / 4 threads each, at least 1)" 0 "^$(( $(nproc) / 4 > 1 ? $(nproc) / 4 : 1 ))$" -- \
  $PY -c "import json; print(json.load(open('$tmp/ptq4/report.json'))['calibration']['threads'])"
# torchrun from the installed torch starts the ranks (its environment: RANK, WORLD_SIZE, MASTER_*).
torchrun=$(dirname "$PY")/torchrun
check "torchrun --nproc-per-node 2 --no-python qfx ptq runs" 0 "wrote model_int8.onnx" -- env -u OMP_NUM_THREADS \
  "$torchrun" --nproc-per-node 2 --master-port 29517 --no-python "$QFX" ptq "${ptq_args[@]}" --set output.dir="$tmp/ptq_torchrun"
check "torchrun: model_int8.onnx byte-identical to one process; report.json says 2 processes" 0 "^identical 2$" -- bash -c \
  "cmp -s '$tmp/ptq1/model_int8.onnx' '$tmp/ptq_torchrun/model_int8.onnx' && echo identical \$($PY -c \"import json; print(json.load(open('$tmp/ptq_torchrun/report.json'))['calibration']['processes'])\")"
check "a malformed MASTER_PORT names the variable" 3 "environment variable MASTER_PORT='http': expected an integer" -- \
  env WORLD_SIZE=2 RANK=0 MASTER_PORT=http "$QFX" ptq "${ptq_args[@]}" --set output.dir="$tmp/bad_port"
check "torchrun's environment without RANK" 3 "WORLD_SIZE is 2 but RANK is not set" -- \
  env WORLD_SIZE=2 "$QFX" ptq "${ptq_args[@]}" --set output.dir="$tmp/bad_env"
check "more processes than calibration batches" 3 "2 calibration batches for 3 processes" -- \
  "$QFX" ptq --nproc 3 --set calibration.num_samples=128 --set output.dir="$tmp/bad_few"

# Ranks that never come: the timeout is honoured as set (not twice over) and the
# error names who is missing, from the side that waits and from the side that came late.
check "rank 0 alone: rank 1 never joined, within the timeout" 10 "rank 1 never joined within the timeout \\(4 s" -- \
  bash -c "s=\$(date +%s); env WORLD_SIZE=2 RANK=0 MASTER_PORT=29531 QFX_DIST_TIMEOUT=4 '$QFX' ptq ${ptq_args[*]} \
    --set output.dir='$tmp/alone0' 2>&1; rc=\$?; [ \$((\$(date +%s) - s)) -le 12 ] || echo 'took too long'; exit \$rc"
check "rank 1 of 3 alone: rank 0, host of the store, never came" 10 "rank 0 \\(it hosts the rendezvous store at 127.0.0.1:29532\\) never came" -- \
  env WORLD_SIZE=3 RANK=1 MASTER_PORT=29532 QFX_DIST_TIMEOUT=3 "$QFX" ptq "${ptq_args[@]}" --set output.dir="$tmp/alone1"
check "ranks 0 and 2 of 3: rank 1 never joined; no output folder left" 0 "^10 rank 1 never joined none$" -- bash -c \
  "env WORLD_SIZE=3 RANK=2 MASTER_PORT=29533 QFX_DIST_TIMEOUT=4 '$QFX' ptq ${ptq_args[*]} --set output.dir='$tmp/alone2' >/dev/null 2>&1 &
   env WORLD_SIZE=3 RANK=0 MASTER_PORT=29533 QFX_DIST_TIMEOUT=4 '$QFX' ptq ${ptq_args[*]} --set output.dir='$tmp/alone2' > '$tmp/alone2.log' 2>&1
   rc=\$?; wait; echo \$rc \$(grep -o 'rank 1 never joined' '$tmp/alone2.log') \$([ -e '$tmp/alone2' ] && echo left || echo none)"

# A rank killed mid-calibration: the survivor names it and exits non-zero within the timeout; no output.
check "a killed rank: the job fails naming it" 10 "rank 1 stopped" -- \
  env QFX_TEST_KILL_RANK=1 QFX_DIST_TIMEOUT=20 timeout 120 "$QFX_FAULTS" ptq --nproc 2 "${ptq_args[@]}" --set output.dir="$tmp/killed"
check "a killed rank: no output files, no staging folder left" 0 "^none$" -- bash -c \
  "{ ls -A '$tmp/killed' 2>/dev/null; ls -A '$tmp' | grep -E 'staging'; } | grep . || echo none"

# QAT: 2 processes x batch 32 against 1 process x batch 64, 5 steps, same data order
# (batch-norm statistics frozen from step 0: they are per rank). The two sum their
# gradients in another order, so they differ by float rounding (1e-7); fake
# quantization rounds, so after enough steps one value lands on the other side of a
# rounding boundary in one run and the runs part by a quantization step (libtorch 2.15:
# at step 19 of this job, 5e-3). The comparison is made before that can happen.
qat_args=(--set training.num_samples=1280 --set training.epochs=1 --set training.max_steps=5 --set training.freeze_bn_after=0
          --set calibration.num_samples=128 --set evaluation.num_samples=128)
# One thread per process on any machine: another thread count sums in another order
# too (docs/distributed.md), which this comparison is not about.
check "qfx qat --nproc 1, batch 64" 0 "trained 5 steps" -- \
  env OMP_NUM_THREADS=1 "$QFX" qat "${qat_args[@]}" --set training.batch_size=64 --set output.dir="$tmp/qat1"
check "qfx qat --nproc 2, batch 32" 0 "trained 5 steps" -- \
  env OMP_NUM_THREADS=1 "$QFX" qat --nproc 2 "${qat_args[@]}" --set training.batch_size=32 --set output.dir="$tmp/qat2"
check "qfx qat: 2 x 32 and 1 x 64 give the same weights (1e-5 relative) and observer ranges" 0 "^same" -- $PY -c "
import json, torch
a = torch.jit.load('$tmp/qat1/qat_checkpoint.pt'); b = torch.jit.load('$tmp/qat2/qat_checkpoint.pt')
pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
assert pa.keys() == pb.keys() and len(pa) > 10, (len(pa), len(pb))
worst = max(((pa[k] - pb[k]).abs().max() / pa[k].abs().max().clamp_min(1e-12)).item() for k in pa)
ba, bb = dict(a.named_buffers()), dict(b.named_buffers())
bw = max(((ba[k].double() - bb[k].double()).abs().max() / ba[k].double().abs().max().clamp_min(1e-12)).item() for k in ba if ba[k].numel())
t = json.load(open('$tmp/qat2/report.json'))['training']
assert t['processes'] == 2 and t['qparams_identical_on_all_ranks'] is True, t
limit = 1e-5
print('same' if worst < limit and bw < limit else 'differ', worst, bw, 'limit', limit)"

check "qfx qat --nproc 2: a last global batch that leaves a rank empty is refused before training" 3 \
  "last global batch of each epoch \\(32 samples\\) leaves rank 1 without samples" -- \
  "$QFX" qat --nproc 2 "${qat_args[@]}" --set training.num_samples=96 --set training.max_steps=0 --set training.batch_size=32 \
  --set output.dir="$tmp/qat_uneven"

# A checkpoint of a 2-process run resumes in 1 process (another world size).
check "qfx qat: a 2-process checkpoint resumes with 1 process" 0 "trained 24 steps" -- \
  "$QFX" qat "${qat_args[@]}" --set training.epochs=2 --set training.max_steps=24 --set training.batch_size=64 \
  --set training.resume="$tmp/qat2/qat_checkpoint.pt" --set output.dir="$tmp/qat_resume"

check_encodings "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
