// Shape propagation (torch.fx.passes.shape_prop.ShapeProp): runs the graph once
// and records what each node produced in its meta.
#pragma once

#include <string>
#include <vector>

#include "qfx/fx/interpreter.h"

namespace qfx::fx {

/// Runs a GraphModule on example inputs (no gradient) and records, for every
/// node whose value is a tensor:
/// - meta["shape"]: int[] sizes;
/// - meta["dtype"]: str, the scalar type ("Float", "Long", ...);
/// - meta["stride"]: int[] strides;
/// - meta["memory_format"]: str, "channels_last" for a 4-D tensor whose strides
///   are NHWC, "contiguous" for a contiguous one, "strided" otherwise.
/// Nodes producing a tuple or list of tensors get meta["shapes"] (a list of int[])
/// and meta["dtype"] of the first. `Graph::print_tabular` shows shape and dtype.
/// Errors as Interpreter::run (qfx::ExecutionError naming the node).
class ShapeProp : public Interpreter {
 public:
  explicit ShapeProp(GraphModule& gm) : Interpreter(gm) {}
  /// Runs the graph on `example_inputs` (one per placeholder) and returns the output.
  c10::IValue propagate(std::vector<c10::IValue> example_inputs);

 protected:
  c10::IValue run_node(const Node* n) override;
};

/// The ATen element type of an input dtype name: kLong for "int64", kInt for
/// "int32", kBool for "bool", kFloat for "float32" and anything else (the inputs' default).
at::ScalarType input_scalar_type(const std::string& dtype);

/// ShapeProp on zero-filled inputs of the given shapes (one per placeholder):
/// float32, or int64 / int32 where `input_dtypes` says so ("float32" where it is
/// shorter).
void propagate_shapes(GraphModule& gm, const std::vector<std::vector<int64_t>>& input_shapes,
                      const std::vector<std::string>& input_dtypes = {});

}  // namespace qfx::fx
