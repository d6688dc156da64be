// Fault injection points: a hook that tests install; none in production.
#include "qfx/quant/fault_injection.h"

#include <utility>

namespace qfx::quant::testing {
namespace {
FaultHook& hook() {
  static FaultHook h;
  return h;
}
}  // namespace

void set_fault_hook(FaultHook h) { hook() = std::move(h); }

void fault_point(FaultPoint point, int rank, long long step) {
  if (const FaultHook& h = hook()) h(point, rank, step);
}

}  // namespace qfx::quant::testing
