// Test helpers: a weight-only QConfigMapping, and calibration of a prepared graph in libtorch.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/qconfig.h"

namespace qfx::test {

/// Symmetric weights of `bits` bits in an int8 container, per output channel, or in
/// blocks of `block` input channels when `block` > 0; activations float (weight-only);
/// for the object types `types`, everything else float.
inline quant::QConfigMapping weight_only(int bits, int64_t block, const std::vector<std::string>& types = {"Linear"}) {
  auto q = std::make_shared<quant::QConfig>();
  q->activation.keep_float = true;
  q->weight.per_channel = true;
  if (block > 0) q->weight.block_size = block;
  q->weight.bits = bits;
  q->weight.qscheme = quant::QScheme::kSymmetric;
  q->weight.dtype = quant::QDType::kInt8;
  quant::QConfigMapping m;
  m.set_global(nullptr);
  for (const auto& t : types) m.set_object_type(t, q);
  return m;
}

/// Observes `x` (one batch) through the prepared `gm` in libtorch, then leaves it
/// fake-quantizing with its observers off.
inline void calibrate_on(fx::GraphModule& gm, const at::Tensor& x) {
  at::NoGradGuard ng;
  quant::set_quant_state(gm, quant::QuantState::kCalibration);
  gm.forward(x);
  quant::set_quant_state(gm, quant::QuantState::kFakeQuant);
  quant::disable_observer(gm);
}

}  // namespace qfx::test
