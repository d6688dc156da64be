// Canonical op names: how quant/ passes and BackendConfig files name the op a
// graph node performs, whether it is a module, an aten op or a fused module.
#pragma once

#include <string>

#include "qfx/fx/graph_module.h"

namespace qfx::quant {

/// The op a node performs, in BackendConfig spelling: module classes and aten ops
/// in snake_case ("conv2d", "batchnorm2d", "relu", "relu6", "add", "cat",
/// "flatten", "reshape", "max_pool2d", ...). In-place and out-of-place forms share
/// a name (relu_ -> relu); hardtanh(0, 6) is "relu6"; view is "reshape".
/// Returns "" for placeholder/get_attr/output, "wrapped" for wrapped methods and
/// functions, "fake_quantize" for qfx observer modules, and the lowercased aten
/// name (or module class) for anything else.
std::string canonical_op_name(const fx::Node& n, const fx::GraphModule& gm);

/// The dotted module path a node belongs to: a call_module's target, otherwise
/// `meta["module_path"]` ("" for the root).
std::string node_module_path(const fx::Node& n);

/// The QConfigMapping object type of a node: the module class ("Conv2d") for
/// call_module nodes, the canonical op name for the rest.
std::string node_object_type(const fx::Node& n, const fx::GraphModule& gm);

/// True for a recurrent layer's op ("lstm", "gru": aten::lstm.input / gru.input).
bool is_recurrent_op(const std::string& op);

/// True if `n` has users and every one is a recurrent layer (its initial state of
/// zeros, its weights' quantizers).
bool read_by_recurrent_only(const fx::Node& n, const fx::GraphModule& gm);

/// True if the node's value is a tensor (from the tracer's `meta["is_tensor"]`;
/// call_module nodes are assumed to return tensors).
bool produces_tensor(const fx::Node& n);

}  // namespace qfx::quant
