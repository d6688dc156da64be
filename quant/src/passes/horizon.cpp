// horizon_plugin_pytorch names (see horizon.h).
#include "qfx/quant/horizon.h"

namespace qfx::quant {

int set_fake_quantize(torch::nn::Module& model, FakeQuantState state) {
  const int n = set_quant_state(model, state == FakeQuantState::kCalibration ? QuantState::kCalibration : QuantState::kFakeQuant);
  enable_observer(model, state != FakeQuantState::kValidation);
  return n;
}

}  // namespace qfx::quant
