// Internal: which dims of each value are static and which follow the dynamic
// batch, for exporting shape arithmetic (size(), view with computed shapes, chunk).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::quant::detail {

/// One dim of a value: its size, or the dynamic batch size.
struct Dim {
  int64_t value = 0;   ///< the size (static dims); the multiple k of the batch (batch dims)
  bool batch = false;  ///< equals k times the model's dynamic batch dimension
};

/// The dims of every tensor-valued node of `gm` with `input_shapes` (-1: the
/// dynamic batch, first dim only). Runs shape propagation twice (batch 2 and 3,
/// eval mode, observers paused, everything restored after): a dim equal in both
/// runs is static, one equal to the batch in both is `batch`; any other
/// batch-dependent dim is reported with value -1 and batch false. Throws
/// UnsupportedOpError for other dynamic dims, ExecutionError from the graph.
/// `input_dtypes` as fx::propagate_shapes (integer inputs run on zeros of their type).
std::map<const fx::Node*, std::vector<Dim>> batch_shapes(fx::GraphModule& gm,
                                                         const std::vector<std::vector<int64_t>>& input_shapes,
                                                         const std::vector<std::string>& input_dtypes = {});

}  // namespace qfx::quant::detail
