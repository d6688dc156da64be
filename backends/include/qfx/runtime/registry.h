// The kernel registry: runtime backends by name, and per backend and op an
// ordered list of kernel implementations (as oneDNN's implementation lists or
// TVM's op strategies). A plan asks each implementation in turn, starting with
// the backend's own and then those of the backend it inherits from, down to
// `reference`; the first that does not decline runs the node, and the plan
// records who declined and why (Model::kernel_report, `qfx run --explain`).
//
// Built-in backends: `reference` (plain C++ kernels that define the arithmetic)
// and `onednn` (oneDNN primitives, then vectorised kernels, then the reference).
// A vendor backend is registered by name, in the program or from a plug-in shared
// library (load_plugin), registers kernels for the ops its chip runs and inherits
// the reference kernels for the rest.
#pragma once

#include <map>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "qfx/runtime/kernel.h"

namespace qfx::runtime {

/// A runtime backend.
struct BackendInfo {
  std::string name;                ///< e.g. "onednn", "example_npu"
  /// The backend whose kernels are tried after this one's ("reference" by
  /// default; empty only for "reference" itself).
  std::string parent = "reference";
  std::string description;         ///< one line for `qfx run --explain` and errors
  /// Ops whose kernels on this backend take and give channels-last (NHWC) 4-D
  /// values; the planner keeps a value channels last only when every consumer's
  /// op is in this set (or in a parent's). Empty: every value stays plain. Kernels
  /// registered with takes_nhwc add their op here.
  std::set<std::string> nhwc_ops;
  /// A backend with its own device memory (the `cuda` backend): allocates `bytes`
  /// of it for values that stay on the device between two of its kernels (both
  /// with Kernel::device_io). Unset: every value lives in host memory.
  std::function<std::shared_ptr<uint8_t[]>(size_t bytes)> device_alloc = nullptr;
  /// Copies `bytes` of a device-resident value to host memory at `host` (the run's
  /// taps and watch callbacks observe such values through it). Set with device_alloc.
  std::function<void(void* host, const void* device, size_t bytes)> device_to_host = nullptr;
};

/// One implementation that declined a node, and why.
struct KernelDecline {
  std::string impl;    ///< implementation name ("onednn", "simd", ...)
  std::string reason;  ///< e.g. "8-bit weights without VNNI would saturate in int16"
};

/// Which implementation runs one node of a plan, and which declined before it.
struct KernelChoice {
  std::string node;     ///< node name
  std::string op;       ///< op after QDQ matching ("QLinearConv", "Add", ...)
  std::string backend;  ///< the backend the implementation is registered on
  std::string impl;     ///< the implementation that runs it
  std::vector<KernelDecline> declined;  ///< in the order they were asked
  bool folded = false;  ///< evaluated once when the plan was built (constant inputs)
  /// Its outputs stay in the backend's device memory (BackendInfo::device_alloc):
  /// every consumer reads them there.
  bool device_outputs = false;
  /// dtype_name of the first output ("uint8", "float32", ...): whether the node
  /// computes on integer codes or in float.
  std::string dtype;
  /// The values the node reads that are computed (graph inputs or other nodes'
  /// outputs; constants left out) and the values it writes: the graph's edges.
  std::vector<std::string> inputs, outputs;
};

/// How many nodes of each op run on each implementation, nodes folded at plan time
/// left out: {"QLinearConv:onednn": 9, "QLinearAdd:simd": 3, ...}.
std::map<std::string, int> kernel_counts(const std::vector<KernelChoice>& report);

/// Registers (or replaces) backend `info.name`. Throws ConfigError when its
/// parent is not registered, or when the name is empty.
void register_backend(const BackendInfo& info);

/// Appends implementation `impl` of op `op` to backend `backend`'s list (tried
/// after the ones registered before it on that backend). `takes_nhwc`: the
/// implementation runs channels-last 4-D values (Kernel::accepts_nhwc where it
/// can), which adds `op` to the backend's BackendInfo::nhwc_ops. Throws ConfigError
/// for an unknown backend.
void register_kernel(const std::string& backend, const std::string& op, const std::string& impl, KernelFactory factory,
                     bool takes_nhwc);
/// register_kernel of an implementation that takes plain (NCHW) values only.
void register_kernel(const std::string& backend, const std::string& op, const std::string& impl, KernelFactory factory);

/// The ops with at least one implementation registered on backend `name` itself
/// (not its parents), sorted. Throws ConfigError for an unknown backend.
std::vector<std::string> registered_ops(const std::string& name);

/// True if `name` is a registered backend (built in or from a loaded plug-in).
bool has_backend(const std::string& name);
/// The registered backends' names, sorted.
std::vector<std::string> backend_names();
/// The registration of `name`. Throws ConfigError naming the registered backends
/// for an unknown one.
BackendInfo backend_info(const std::string& name);
/// Backends tried for a node on `name`: itself, its parent, ... "reference".
std::vector<std::string> backend_chain(const std::string& name);

/// Loads a plug-in shared library (dlopen) and calls its registration entry
/// point `extern "C" int qfx_runtime_plugin_init(int api_version)` (define it with
/// QFX_RUNTIME_PLUGIN), which registers backends and kernels and returns 0.
/// Loading the same path twice is a no-op. Throws IoError naming the path for a
/// missing file, a library that does not load (with dlerror's text), one without
/// the entry point, or one built for another plug-in API version.
void load_plugin(const std::string& path);

/// The versions of the libraries the runtime's kernels call, as name -> version
/// ("onednn" -> "3.7.1": the oneDNN loaded at run time, dnnl_version()).
std::vector<std::pair<std::string, std::string>> library_versions();

/// The folder holding the loaded runtime library (libqfx_runtime.so), found at
/// run time (dladdr); empty if it cannot be told. An installed qfx finds its data
/// relative to it (`<prefix>/lib` -> `<prefix>/share/qfx`).
std::string runtime_library_dir();

/// The plug-in API version this runtime implements (bumped when kernel.h changes).
constexpr int kPluginApiVersion = 1;

}  // namespace qfx::runtime

/// Defines a plug-in's entry point: `QFX_RUNTIME_PLUGIN { register_backend(...); ... }`.
#define QFX_RUNTIME_PLUGIN                                                   \
  static void qfx_plugin_register_();                                        \
  extern "C" __attribute__((visibility("default"))) int qfx_runtime_plugin_init(int api_version) { \
    if (api_version != ::qfx::runtime::kPluginApiVersion) return 1;          \
    qfx_plugin_register_();                                                  \
    return 0;                                                                \
  }                                                                          \
  static void qfx_plugin_register_()
