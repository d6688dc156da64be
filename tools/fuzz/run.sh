#!/usr/bin/env bash
# Builds qfx's libFuzzer targets with clang, AddressSanitizer and UBSan, and runs
# each for SECONDS (default 60) from its seed corpus in tests/fuzz/corpus/<target>/.
#
# Usage: tools/fuzz/run.sh [SECONDS] [TARGET...]     (targets: onnx npy idx image yaml onnx_model onnx_external pt2)
# Env:   BUILD (default build-fuzz), JOBS (targets run at once, default 1),
#        SKIP_BUILD=1 (run the targets already built in BUILD).
# Output: per target, the executions and the findings; a crashing input is kept
# as BUILD/findings/<target>/crash-* (turn each into a regression test). Exits 1
# if any target found a crash, leak, timeout or out-of-memory.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(onnx npy idx image yaml onnx_model onnx_external pt2)
BUILD="${BUILD:-build-fuzz}"
JOBS="${JOBS:-1}"

need=()
for p in clang libclang-rt-14-dev libomp-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "fuzz: installing ${need[*]}"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if [ "${SKIP_BUILD:-0}" != 1 ]; then
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DQFX_FUZZ=ON -DQFX_SANITIZE=address,undefined -DQFX_BUILD_TESTS=OFF -DQFX_WITH_CUDA=OFF >/dev/null
cmake --build "$BUILD" -j2 --target $(printf 'fuzz_%s ' "${TARGETS[@]}")
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
run_one() {
  local t="$1" work="$BUILD/corpus/$1" found="$BUILD/findings/$1/" log="$BUILD/fuzz_$1.log"
  mkdir -p "$work" "$found"
  set +e
  "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$found" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  local rc=$?
  set -e
  local execs cov
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  local n_found
  n_found=$(find "$found" -type f | wc -l)
  printf 'fuzz_%-6s %6ss  executions %-10s coverage %-6s findings %s  exit %s  (log %s)\n' "$t" "$SECONDS_EACH" "$execs" "$cov" "$n_found" "$rc" "$log"
  [ "$rc" -eq 0 ] && [ "$n_found" -eq 0 ]
}
export -f run_one
export BUILD SECONDS_EACH
status=0
printf '%s\n' "${TARGETS[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_one {}' || status=1
[ $status -eq 0 ] && echo "fuzz: no findings" || echo "fuzz: FINDINGS (see $BUILD/findings/)"
exit $status
