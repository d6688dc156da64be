// The kernel registry: backends by name, implementations per backend and op,
// selection with reasons, and plug-in loading (dlopen).
#include "qfx/runtime/registry.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "kernels.h"
#include "qfx/error.h"
#include "qfx/runtime/op_schema.h"

namespace qfx::runtime {
namespace {

struct Impl {
  std::string name;
  KernelFactory factory;
};

struct Entry {
  BackendInfo info;
  std::map<std::string, std::vector<Impl>> ops;
};

struct Registry {
  std::recursive_mutex mu;
  std::map<std::string, Entry> backends;
  std::set<std::string> plugins;  // canonical paths loaded
};

Registry& reg() {
  static Registry r;
  return r;
}

void register_builtins() {
  add_backend({"reference", "", "plain C++ kernels that define the integer arithmetic", {}});
  register_reference_conv_gemm();
  register_reference_elementwise();
  register_reference_logic();
  register_reference_pooling();
  register_reference_shape();
  register_reference_gather();
  register_reference_rnn();
  register_reference_quantize();
  register_reference_lut();
  register_reference_integer_only();
  register_reference_qsoftmax();
  register_reference_binary();
  register_reference_reduce();
  register_reference_scan();
  register_reference_index();
  register_reference_generate();
  register_reference_norm();
  register_reference_pad();
  register_reference_matmul_nbits();
  add_backend({"onednn", "reference", "oneDNN primitives, then vectorised kernels, then the reference", {}});
  register_simd_gemv();  // before oneDNN's inner product, which it beats for few rows
  register_onednn_kernels();
  register_simd_kernels();
  register_simd_matmul();
  register_simd_matmul_nbits();
  register_simd_pool_lut();
#ifdef QFX_HAVE_CUDA
  register_cuda_kernels();
#endif
}

// Built-ins registered before anything else looks at the registry.
Registry& ready() {
  static std::once_flag once;
  std::call_once(once, register_builtins);
  return reg();
}

std::string names_of(const std::map<std::string, Entry>& m) {
  std::string s;
  for (const auto& kv : m) s += (s.empty() ? "" : ", ") + kv.first;
  return s;
}

}  // namespace

void add_backend(const BackendInfo& info) {
  Registry& r = reg();
  std::lock_guard<std::recursive_mutex> lk(r.mu);
  if (info.name.empty()) throw ConfigError("register_backend: empty backend name");
  if (info.name != "reference" && !r.backends.count(info.parent))
    throw ConfigError("register_backend '" + info.name + "': parent backend '" + info.parent +
                      "' is not registered (registered: " + names_of(r.backends) + ")");
  Entry& e = r.backends[info.name];
  const std::set<std::string> registered_nhwc = e.info.nhwc_ops;  // kernels registered before keep theirs
  e.info = info;
  e.info.nhwc_ops.insert(registered_nhwc.begin(), registered_nhwc.end());
  if (info.name == "reference") e.info.parent.clear();
}

void add_kernel(const std::string& backend, const std::string& op, const std::string& impl, KernelFactory factory,
                bool takes_nhwc) {
  Registry& r = reg();
  std::lock_guard<std::recursive_mutex> lk(r.mu);
  auto it = r.backends.find(backend);
  if (it == r.backends.end())
    throw ConfigError("register_kernel " + op + " (" + impl + "): backend '" + backend +
                      "' is not registered (registered: " + names_of(r.backends) + ")");
  it->second.ops[op].push_back({impl, std::move(factory)});
  if (takes_nhwc) it->second.info.nhwc_ops.insert(op);
}

void register_backend(const BackendInfo& info) {
  ready();
  add_backend(info);
}

void register_kernel(const std::string& backend, const std::string& op, const std::string& impl, KernelFactory factory,
                     bool takes_nhwc) {
  ready();
  add_kernel(backend, op, impl, std::move(factory), takes_nhwc);
}

void register_kernel(const std::string& backend, const std::string& op, const std::string& impl, KernelFactory factory) {
  register_kernel(backend, op, impl, std::move(factory), false);
}

std::vector<std::string> registered_ops(const std::string& name) {
  Registry& r = ready();
  std::lock_guard<std::recursive_mutex> lk(r.mu);
  auto it = r.backends.find(name);
  if (it == r.backends.end()) throw ConfigError("backend '" + name + "' is not registered (registered: " + names_of(r.backends) + ")");
  std::vector<std::string> ops;
  for (const auto& kv : it->second.ops) ops.push_back(kv.first);
  return ops;
}

bool has_backend(const std::string& name) {
  Registry& r = ready();
  std::lock_guard<std::recursive_mutex> lk(r.mu);
  return r.backends.count(name) != 0;
}

std::vector<std::string> backend_names() {
  Registry& r = ready();
  std::lock_guard<std::recursive_mutex> lk(r.mu);
  std::vector<std::string> out;
  for (const auto& kv : r.backends) out.push_back(kv.first);
  return out;
}

BackendInfo backend_info(const std::string& name) {
  Registry& r = ready();
  std::lock_guard<std::recursive_mutex> lk(r.mu);
  auto it = r.backends.find(name);
  if (it == r.backends.end())
    throw ConfigError("unknown runtime backend '" + name + "' (registered: " + names_of(r.backends) +
                      "; a plug-in backend needs its library loaded first: ModelOptions::plugins, runtime.plugins, "
                      "qfx run --plugin)");
  return it->second.info;
}

std::vector<std::string> backend_chain(const std::string& name) {
  std::vector<std::string> chain;
  for (std::string b = name; !b.empty(); b = backend_info(b).parent) {
    if (std::find(chain.begin(), chain.end(), b) != chain.end()) break;  // a cycle through re-registration
    chain.push_back(b);
  }
  return chain;
}

namespace {

// A node against its op's schema (op_schema.h): enough inputs (the ONNX fuzzer found
// an Add with one input reading past its inputs); float ops read float32 (it found
// a QuantizeLinear reading a uint8 input as float); int8 ops read the 8-bit codes
// their qparams describe.
void check_schema(const ir::Node& n, const std::vector<Meta>& in) {
  const OpSchema* s = find_op_schema(n.op);
  const size_t need = s ? s->min_inputs : 1;
  if (in.size() < need)
    throw DataError(n.label() + ": needs at least " + std::to_string(need) + " inputs, has " + std::to_string(in.size()));
  const size_t float_inputs = s ? s->float_inputs : 0;
  for (size_t i = 0; i < std::min(float_inputs, in.size()); ++i)
    if (in[i].dtype != DType::kFloat32)
      throw DataError(n.label() + ": input " + std::to_string(i) + " is " + dtype_name(in[i].dtype) + ", " + n.op + " takes float32");
  if (s && !s->input0_dtypes.empty() && std::find(s->input0_dtypes.begin(), s->input0_dtypes.end(), in[0].dtype) == s->input0_dtypes.end()) {
    std::string allowed;
    for (size_t i = 0; i < s->input0_dtypes.size(); ++i)
      allowed += std::string(i == 0 ? "" : i + 1 == s->input0_dtypes.size() ? " or " : ", ") + dtype_name(s->input0_dtypes[i]);
    throw DataError(n.label() + ": input is " + std::string(dtype_name(in[0].dtype)) + ", " + n.op + " takes " + allowed);
  }
  if (float_inputs > 0 || n.in_q.empty()) return;
  for (size_t i = 0; i < std::min(in.size(), n.in_q.size()); ++i) {
    const DType q = n.in_q[i].dtype;
    const bool q16 = q == DType::kInt16 && s && s->wide_input && i == 0;
    if ((q != DType::kUInt8 && q != DType::kInt8 && !q16) || in[i].dtype != q)
      throw DataError(n.label() + ": quantized input " + std::to_string(i) + " is " + dtype_name(in[i].dtype) + " with " +
                      dtype_name(q) + " qparams; int8 ops take the uint8 or int8 (conv / gemm input: int16) codes their "
                      "qparams describe");
  }
}

}  // namespace

Kernel make_kernel(const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts,
                   const std::string& backend, bool nhwc_out, KernelChoice* choice) {
  check_schema(n, in);
  Registry& r = ready();
  // Candidates in order, copied out so factories run without the lock.
  std::vector<std::pair<std::string, Impl>> cands;
  {
    std::lock_guard<std::recursive_mutex> lk(r.mu);
    for (const auto& b : backend_chain(backend)) {
      const Entry& e = r.backends.at(b);
      auto it = e.ops.find(n.op);
      if (it == e.ops.end()) continue;
      for (const auto& impl : it->second) cands.emplace_back(b, impl);
    }
  }
  if (cands.empty())
    throw UnsupportedOpError(n.label() + ": op '" + n.op + "' is not supported by the qfx runtime (no kernel for it on backend '" +
                             backend + "' or the backends it inherits from)");
  KernelChoice local;
  KernelChoice& c = choice ? *choice : local;
  c = KernelChoice{};
  c.node = n.name;
  c.op = n.op;
  KernelRequest req{n, in, consts, nhwc_out, {}};
  for (size_t i = 0; i < cands.size(); ++i) {
    const bool last = i + 1 == cands.size();
    Kernel k;
    bool ok = false;
    req.why.clear();
    try {
      ok = cands[i].second.factory(req, &k);
    } catch (const std::exception& e) {
      if (last) throw;
      req.why = std::string("failed: ") + e.what();
    }
    if (ok && (!k.run || k.outputs.empty())) {
      // A factory that accepts a node must say how to compute its outputs; otherwise
      // they would be whatever memory the plan gave them.
      throw UnsupportedOpError(n.label() + ": kernel '" + cands[i].second.name + "' of backend '" + cands[i].first +
                               "' accepted the node but gave " + (k.run ? "no outputs" : "no run function"));
    }
    if (ok) {
      k.impl = cands[i].second.name;
      c.backend = cands[i].first;
      c.impl = k.impl;
      return k;
    }
    c.declined.push_back({cands[i].second.name, req.why.empty() ? "declined (no reason given)" : req.why});
  }
  std::string why;
  for (const auto& d : c.declined) why += "; " + d.impl + ": " + d.reason;
  throw UnsupportedOpError(n.label() + ": no kernel on backend '" + backend + "' runs this configuration" + why);
}

std::map<std::string, int> kernel_counts(const std::vector<KernelChoice>& report) {
  std::map<std::string, int> out;
  for (const auto& c : report)
    if (!c.folded) ++out[c.op + ":" + c.impl];
  return out;
}

void load_plugin(const std::string& path) {
  ready();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw IoError(path + ": runtime plug-in not found");
  const std::string canon = fs::canonical(path, ec).string();
  Registry& r = reg();
  std::lock_guard<std::recursive_mutex> lk(r.mu);
  if (r.plugins.count(canon)) return;
  // The plug-in links libqfx_runtime.so itself, so it shares this registry.
  void* h = dlopen(canon.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw IoError(path + ": cannot load runtime plug-in: " + std::string(dlerror()));
  using Init = int (*)(int);
  auto init = reinterpret_cast<Init>(dlsym(h, "qfx_runtime_plugin_init"));
  if (!init) {
    dlclose(h);
    throw IoError(path + ": not a qfx runtime plug-in (no qfx_runtime_plugin_init; define it with QFX_RUNTIME_PLUGIN)");
  }
  int status = 0;
  try {  // the plug-in's own code: whatever it throws is reported with its path
    status = init(kPluginApiVersion);
  } catch (const std::exception& e) {
    throw IoError(path + ": runtime plug-in failed while registering its kernels: " + e.what());
  } catch (...) {
    throw IoError(path + ": runtime plug-in failed while registering its kernels (it threw a non-standard exception)");
  }
  if (status != 0)
    throw IoError(path + ": runtime plug-in refused to register (built for another plug-in API version than " +
                  std::to_string(kPluginApiVersion) + "?)");
  r.plugins.insert(canon);  // kept loaded: its kernels live in the registry
}

std::string runtime_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&runtime_library_dir), &info) == 0 || !info.dli_fname) return "";
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? "" : p.parent_path().string();
}

}  // namespace qfx::runtime
