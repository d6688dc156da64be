// Internal: the op, activation and conv hyper-parameters that FusedConvLinear and
// QuantizedConvLinear both save for qfx::fx::save_graph_module.
#pragma once

#include <stdexcept>
#include <vector>

#include "qfx/fx/serialize.h"
#include "qfx/quant/modules.h"
#include "qfx/error.h"

namespace qfx::quant::detail {

struct ConvSettings {
  FusedConvLinear::Op op = FusedConvLinear::Op::kConv;
  FusedActivation act = FusedActivation::kNone;
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
};

inline void save_conv_settings(fx::ModuleConfig& c, const ConvSettings& s) {
  c.insert("op", static_cast<int64_t>(s.op));
  c.insert("activation", static_cast<int64_t>(s.act));
  c.insert("stride", s.stride);
  c.insert("padding", s.padding);
  c.insert("dilation", s.dilation);
  c.insert("output_padding", s.output_padding);
  c.insert("groups", s.groups);
}

/// Throws std::runtime_error for an op or activation out of range.
inline ConvSettings load_conv_settings(const c10::IValue& c) {
  using fx::config_at;
  const int64_t op = config_at(c, "op").toInt(), act = config_at(c, "activation").toInt();
  if (op < 0 || op > 2 || act < 0 || act > 2) throw InternalError("op or activation out of range");
  ConvSettings s;
  s.op = static_cast<FusedConvLinear::Op>(op);
  s.act = static_cast<FusedActivation>(act);
  s.stride = config_at(c, "stride").toIntVector();
  s.padding = config_at(c, "padding").toIntVector();
  s.dilation = config_at(c, "dilation").toIntVector();
  s.output_padding = config_at(c, "output_padding").toIntVector();
  s.groups = config_at(c, "groups").toInt();
  return s;
}

}  // namespace qfx::quant::detail
