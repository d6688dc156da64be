// horizon_plugin_pytorch's names for qfx's steps, for users coming from Horizon's
// toolchain (docs/quantization.md, "Horizon names"). Each is the qfx function it names.
#pragma once

#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/passes.h"

namespace qfx::quant {

/// Horizon's FakeQuantState, mapped onto qfx's FakeQuantize flags:
enum class FakeQuantState {
  kCalibration,  ///< observers on, fake quantization off (QuantState::kCalibration)
  kQAT,          ///< observers on, fake quantization on (QuantState::kFakeQuant)
  kValidation,   ///< observers off, fake quantization on: frozen qparams, as deployed
};

/// Sets `state` on every FakeQuantize in `model` (horizon_plugin_pytorch's
/// `set_fake_quantize`). Train/eval mode is left as it is. Returns how many
/// FakeQuantize modules were set.
int set_fake_quantize(torch::nn::Module& model, FakeQuantState state);

/// `prepare_fx`: observers inserted, the model in calibration state
/// (horizon_plugin_pytorch's `prepare_calibration_fx`; same errors).
inline PassReport prepare_calibration_fx(fx::GraphModule& gm, const QConfigMapping& mapping, const BackendConfig& backend,
                                         PrepareOptions options = {}) {
  return prepare_fx(gm, mapping, backend, std::move(options));
}

// prepare_qat_fx, fuse_fx and convert_fx carry Horizon's names already
// (passes.h, convert.h).

}  // namespace qfx::quant
