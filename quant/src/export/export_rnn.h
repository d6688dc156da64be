// Internal: what export_onnx's core asks of the recurrent family (export_rnn_ops.cpp).
#pragma once

#include "exporter.h"

namespace qfx::quant::detail {

/// True for a parameter (or a quantizer of one) that only recurrent layers read:
/// the layer writes it, reordered to ONNX's gate order, so the core leaves it out.
bool read_by_rnn_only(Exporter& e, const fx::Node* n);

}  // namespace qfx::quant::detail
