// Internal: the state of a loaded Model, shared by the loader (loader.cpp), the
// planner (planner.cpp: kernels, layouts, memory plan), the executor
// (executor.cpp) and the observer taps (taps.cpp).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "../ir.h"
#include "../kernels.h"
#include "qfx/runtime/model.h"

namespace qfx::runtime {

/// One plan: kernels for one input-shape signature, every value's layout, and the
/// arena the values live in. Used by one run at a time (Model keeps a pool).
struct Plan {
  std::vector<Kernel> kernels;       ///< by node; no `run` for nodes folded at plan time
  std::vector<KernelChoice> choices; ///< by node: which implementation, who declined
  std::vector<Meta> meta;            ///< by value id (shape, dtype, layout)
  std::vector<Tensor> values;        ///< by value id
  std::shared_ptr<uint8_t[]> arena;
  std::vector<std::vector<const Tensor*>> in_ptrs;
  std::vector<std::vector<Tensor*>> out_ptrs;
};

/// "[1, 3, ?, ?]" for messages and plan signatures.
std::string shape_str(const std::vector<int64_t>& s);

struct Model::Impl {
  ir::Graph g;
  std::string backend_name;
  std::map<std::string, int> value_id;
  std::vector<std::string> value_name;
  std::vector<const Tensor*> const_of;  // by value id
  std::vector<std::vector<int>> node_in, node_out;
  std::vector<int> input_ids, output_ids;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<std::string> fallbacks;
  std::set<std::string> keep;       // ModelOptions::keep_values: stay plain, so watching them costs no conversion
  std::set<std::string> nhwc_ops;   // ops whose kernels on this backend take channels last
  int int8_ops = 0;

  mutable std::mutex mu;
  mutable std::map<std::string, std::vector<std::unique_ptr<Plan>>> pool;

  // Observer taps (taps.cpp), fed through the executor's value observation.
  std::vector<bool> tapped;  // by value id
  TapKind tap_kind = TapKind::kMinMax;
  TapOptions tap_opts;
  mutable std::mutex tap_mu;
  mutable std::map<int, TapStats> stats;
  mutable std::vector<uint32_t> tap_scratch;  // [threads * bins] partial histograms

  /// The id of value `name`, made on first use.
  int id(const std::string& name);
  /// Plans the model for concrete input shapes (planner.cpp).
  std::unique_ptr<Plan> build(const std::vector<std::vector<int64_t>>& in_shapes) const;
  /// Folds one value into the taps' statistics (taps.cpp); `nhwc`: stored channels last.
  void tap(int v, const Tensor& t, bool nhwc) const;
};

}  // namespace qfx::runtime
