#!/usr/bin/env bash
# Builds qfx with sanitizers and runs the whole test suite under them.
#
# Usage: tools/sanitize/run.sh address,undefined   (ASan + UBSan; build-asan/)
#        tools/sanitize/run.sh thread              (TSan; build-tsan/)
# Extra arguments go to ctest (e.g. -R Runtime). Exits with ctest's status.
#
# Under TSan, OpenMP runs one thread per team (OMP_NUM_THREADS=1): libgomp is not
# instrumented, so its barriers would look like races in the code they protect.
# The threads the tests start themselves (the 8-thread runtime test) are checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
KIND="${1:?usage: tools/sanitize/run.sh address,undefined|thread [ctest args]}"
shift
case "$KIND" in
  address,undefined|undefined,address|address|undefined) BUILD="${BUILD:-build-asan}" ;;
  thread) BUILD="${BUILD:-build-tsan}" ;;
  *) echo "sanitize: unknown sanitizer list '$KIND' (address,undefined | thread)" >&2; exit 2 ;;
esac
supp="$(pwd)/tools/sanitize"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQFX_SANITIZE="$KIND" -DQFX_WITH_CUDA=OFF >/dev/null
cmake --build "$BUILD" -j2

# Leaks: libtorch and protobuf keep static registries alive until exit; the
# suppressions name those libraries only, never qfx's own.
export ASAN_OPTIONS="detect_leaks=1:detect_odr_violation=0:abort_on_error=0:allocator_may_return_null=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
if [ "$KIND" = thread ]; then export OMP_NUM_THREADS=1; fi
ctest --test-dir "$BUILD" -j2 --output-on-failure --timeout 3000 "$@"
