// Internal: the state of a loaded Model, shared by the loader (loader.cpp), the
// planner (planner.cpp: kernels, layouts, memory plan), the executor
// (executor.cpp) and the observer taps (taps.cpp).
#pragma once

#include <map>
#include <memory>
#include <atomic>
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
  /// By value id: stored in the backend's device memory (Kernel::device_io), in
  /// device_arena; observed through device_to_host.
  std::vector<char> device;
  std::shared_ptr<uint8_t[]> device_arena;
  std::function<void(void*, const void*, size_t)> device_to_host;
  std::vector<std::vector<const Tensor*>> in_ptrs;
  std::vector<std::vector<Tensor*>> out_ptrs;
};

/// Offsets of values in one memory (host or device): values whose lifetimes do not
/// overlap share a slot.
struct SlotPlan {
  std::vector<int> slot_of;
  std::vector<size_t> offset;
  size_t total = 0;
};

/// Which computed values stay in the backend's device memory: produced by a device
/// kernel (Kernel::device_io), read only by device kernels, not a graph output, not a
/// kept value, not folded. Tells every device kernel where its values live.
struct DevicePlacement {
  std::vector<char> device;
  std::function<std::shared_ptr<uint8_t[]>(size_t)> alloc;
  std::function<void(void*, const void*, size_t)> to_host;
};

/// What planning knows so far, by value id: shapes, dtypes and layouts, values
/// folded at plan time (Shape nodes, nodes of constant inputs), and which values may
/// stay channels last.
struct PlanState {
  std::vector<Meta> meta;
  std::vector<Tensor> folded;
  std::vector<char> nhwc_ok;
  /// The constant value `v` holds (an initializer or folded), or null.
  const Tensor* constant(int v, const std::vector<const Tensor*>& const_of) const {
    if (v < 0) return nullptr;
    if (const_of[static_cast<size_t>(v)]) return const_of[static_cast<size_t>(v)];
    return folded[static_cast<size_t>(v)].defined() ? &folded[static_cast<size_t>(v)] : nullptr;
  }
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
  bool keep_any_layout = false;     // ModelOptions::keep_values_any_layout: they may stay channels last
  std::vector<char> watch_as_stored;  // by value id: watched in the layout it is stored in (keep_any_layout)
  std::set<std::string> nhwc_ops;   // ops whose kernels on this backend take channels last
  int int8_ops = 0;

  std::vector<KernelChoice> load_choices;  // of the plan built at load (kernel_report)
  // A model whose dynamic height / width cannot be planned as 1 is planned at its
  // first run: the choices of that plan (guarded by mu).
  mutable std::vector<KernelChoice> first_run_choices;
  // Model::set_profiling / profile: kernel milliseconds by node, guarded by mu.
  std::atomic<bool> profiling{false};
  mutable std::vector<double> profile_ms;
  mutable std::vector<std::string> profile_impl;
  mutable int64_t profile_runs = 0;

  /// Free plans of one input-shape signature, and when the signature was last used.
  struct PoolEntry {
    std::vector<std::unique_ptr<Plan>> free;
    uint64_t last_used = 0;
  };
  mutable std::mutex mu;  // guards pool and tick
  mutable std::map<std::string, PoolEntry> pool;
  mutable uint64_t tick = 0;
  size_t max_signatures = 8;  // ModelOptions::plan_cache_size
  uint64_t max_plan_bytes = 0;  // ModelOptions::max_plan_bytes
  /// A run's inputs checked against the graph's (names, dtypes, declared dims), in
  /// graph order, with the plan signature of their shapes.
  struct Feed {
    std::string signature;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<const Tensor*> tensors;
  };
  /// Throws DataError naming an unknown or missing input, or one whose dtype or shape
  /// the model does not take (executor.cpp).
  Feed check_inputs(const std::map<std::string, Tensor>& given) const;
  /// Runs plan `p`'s kernels in order, observing each computed value (`observe`: value
  /// id, tensor as stored, stored channels last), timing them when profiling.
  void run_kernels(Plan& p, const std::function<void(int, const Tensor&, bool)>& observe) const;
  /// Adds one run's kernel milliseconds to the profile (Model::set_profiling).
  void add_profile(const Plan& p, const std::vector<double>& node_ms) const;
  /// Takes a free plan for `sig` (null if none) and marks the signature used.
  std::unique_ptr<Plan> take_plan(const std::string& sig) const;
  /// Returns a plan to the pool, then evicts the least recently used signatures
  /// beyond `max_signatures` (plans in use by other runs are not affected).
  void return_plan(const std::string& sig, std::unique_ptr<Plan> plan) const;

  /// What set_taps asked for and the statistics it feeds. Published once made: a
  /// run takes the current one at its start, so set_taps never changes what a run
  /// in flight reads (its statistics change only under tap_mu).
  struct TapConfig {
    std::vector<std::shared_ptr<stats::Statistic>> stat;  // by value id; null where not tapped
    TapFactory make;           // what made them (reset_taps makes them anew)
    Model::WatchLayout layout = Model::WatchLayout::kAsStored;
    uint64_t generation = 0;   // runs of another generation add nothing
  };
  // Observer taps (taps.cpp), fed through the executor's value observation.
  mutable std::mutex tap_mu;  // guards taps_cfg and every statistic's observe
  std::shared_ptr<const TapConfig> taps_cfg;
  /// The current tap configuration (under tap_mu).
  std::shared_ptr<const TapConfig> current_taps() const;
  /// Publishes taps on value ids `ids` made by `make` (under tap_mu).
  void publish_taps(const std::vector<int>& ids, TapFactory make, Model::WatchLayout layout);

  /// Value ids of the graph's inputs, node inputs and outputs, and outputs; counts
  /// int8 ops. Throws DataError (naming `path`) for a value read before anything
  /// produces it, or an output never produced (loader.cpp).
  void index_values(const std::string& path);
  /// Plans for the declared shapes (dynamic dims as 1) so a bad model fails at load;
  /// with dynamic inner dims a plan that does not fit waits for the first run.
  void plan_at_load();
  /// The id of value `name`, made on first use.
  int id(const std::string& name);
  /// Plans the model for concrete input shapes (planner.cpp).
  std::unique_ptr<Plan> build(const std::vector<std::vector<int64_t>>& in_shapes) const;
  /// By value id: may be stored channels last (every consumer's op takes it; not an
  /// output, not a kept value).
  std::vector<char> nhwc_values() const;
  /// Node n's kernel (or its value folded now) into `p`; its outputs' metas into `st`.
  void plan_node(size_t n, PlanState& st, Plan& p) const;
  /// The memory plan (host and device arenas) and every value's tensor.
  void allocate(Plan& p, const PlanState& st, const std::vector<std::vector<int64_t>>& in_shapes) const;
  /// Every value's tensor (constant, folded, or a view into its arena slot) and each
  /// node's input and output pointers.
  void bind_values(Plan& p, const PlanState& st, const SlotPlan& host, const SlotPlan& device) const;
  /// The planner's memory plan of the values `member` selects (planner.cpp).
  SlotPlan plan_slots(const std::vector<Meta>& meta, const std::vector<Tensor>& folded, std::vector<int> last_use,
                      const std::vector<char>& member) const;
  /// Which values of plan `p` stay in device memory; calls the device kernels' place.
  DevicePlacement place_on_device(Plan& p, const std::vector<Tensor>& folded) const;
  /// Folds one value into its tap's statistic (taps.cpp) if `cfg` is still the
  /// current configuration; `nhwc`: stored channels last.
  void tap(const TapConfig& cfg, int v, const Tensor& t, bool nhwc) const;
};

}  // namespace qfx::runtime
