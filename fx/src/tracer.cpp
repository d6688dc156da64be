#include "qfx/fx/tracer.h"

#include "qfx/fx/exported_program.h"
#include "qfx/fx/onnx_model.h"

#include "archive_size.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/library.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cctype>
#include <mutex>

#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "leaves/registry.h"
#include "trace_impl.h"
#include "qfx/error.h"
#include "qfx/fx/op_libraries.h"

namespace qfx::fx {

using c10::IValue;
using JNode = torch::jit::Node;
using JValue = torch::jit::Value;

// ---- WrapSpec -------------------------------------------------------------------

WrapSpec WrapSpec::parse(const std::string& text) {
  auto trim = [](std::string s) {
    size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  WrapSpec w;
  std::string t = trim(text);
  const auto colon = t.find(':');
  if (colon != std::string::npos && t.compare(colon, 2, "::") != 0) {
    std::string kind = trim(t.substr(0, colon));
    w.name = trim(t.substr(colon + 1));
    if (kind == "method") w.kind = Kind::kMethod;
    else if (kind == "function") w.kind = Kind::kFunction;
    else if (kind == "module_type") w.kind = Kind::kModuleType;
    else if (kind == "module") w.kind = Kind::kModule;
    else
      throw ConfigError("wrap entry '" + text + "': unknown kind '" + kind +
                        "' (expected method, function, module_type or module)");
  } else {
    w.name = t;
    w.kind = t.find("::") != std::string::npos ? Kind::kFunction : Kind::kAny;
  }
  if (w.name.empty()) throw ConfigError("wrap entry '" + text + "': empty name");
  return w;
}

std::string WrapSpec::str() const {
  switch (kind) {
    case Kind::kAny: return name;
    case Kind::kMethod: return "method:" + name;
    case Kind::kFunction: return "function:" + name;
    case Kind::kModuleType: return "module_type:" + name;
    case Kind::kModule: return "module:" + name;
  }
  return name;
}

// ---- loading --------------------------------------------------------------------

torch::jit::Module load_torchscript(const std::string& path) {
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw IoError(path + ": cannot open TorchScript file (missing or unreadable)");
    char magic[4] = {0, 0, 0, 0};
    f.read(magic, 4);
    if (f.gcount() < 4 || magic[0] != 'P' || magic[1] != 'K') {
      throw IoError(path + ": not a TorchScript archive (expected a zip file saved by torch.jit.save)");
    }
  }
  // A small archive can unpack to gigabytes: measure before anything is unpacked.
  detail::check_unpacked_size(path, "cannot load TorchScript archive (truncated or corrupt?)");
  bool tried_torchvision = false;
  // An operator no loaded library registers (libtorch raises it as c10::Error or as
  // the compiler's ErrorReport): torchvision's is loaded on demand, any other is the
  // user's to name. Returns true to retry.
  auto unknown_op = [&](const std::string& msg) {
    const std::string tag = "Unknown builtin op: ";
    const auto at = msg.find(tag);
    if (at == std::string::npos) return false;
    std::string op = msg.substr(at + tag.size());
    op = op.substr(0, op.find_first_of(" \n"));
    if (!op.empty() && op.back() == '.') op.pop_back();
    const bool tv = op.rfind("torchvision::", 0) == 0;
    if (tv && !tried_torchvision) {
      tried_torchvision = true;
      if (!load_torchvision_operators().empty()) return true;
    }
    throw ConfigError(path + ": the model calls operator '" + op + "', which no loaded library registers: " +
                      (tv ? "install python3-torchvision or " : "") +
                      "name its library in model.libraries: [lib.so] (qfx: --library lib.so)");
  };
  for (;;) {
    try {
      return torch::jit::load(path);
    } catch (const c10::Error& e) {
      std::string msg = e.what_without_backtrace();
      if (unknown_op(msg)) continue;
      auto nl = msg.find('\n');
      if (nl != std::string::npos) msg = msg.substr(0, nl);
      throw IoError(path + ": cannot load TorchScript archive (truncated or corrupt?): " + msg);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      if (unknown_op(e.what())) continue;
      std::string msg = e.what();
      throw IoError(path + ": cannot load TorchScript archive: " + msg.substr(0, msg.find('\n', 1)));
    }
  }
}

using detail::TraceImpl;
using detail::collect_model_wraps;

std::shared_ptr<GraphModule> trace_module(std::shared_ptr<torch::nn::Module> module, const ForwardFn& forward,
                                          std::vector<c10::IValue> example_inputs, TracerOptions options) {
  // Every parameter and buffer is a graph input, so the tracer refers to it
  // instead of baking it in as a constant.
  std::vector<TraceImpl::CxxTensor> tensors;
  for (const auto& p : module->named_parameters(true)) tensors.push_back({p.key(), p.value(), false});
  for (const auto& b : module->named_buffers(true)) tensors.push_back({b.key(), b.value(), true});
  std::unordered_map<std::string, TraceImpl::CxxLeaf> leaves;
  for (const auto& item : module->named_modules("", /*include_self=*/false)) {
    auto m = item.value();
    TraceImpl::CxxLeaf leaf;
    leaf.module = m;
#define QFX_CXX_LEAF(Impl, Name)                                                                   \
    if (auto c = std::dynamic_pointer_cast<torch::nn::Impl>(m)) {                                  \
      leaf.fn = tensor_call_fn(c);                                                                 \
      leaf.type = "torch.nn.modules." Name;                                                        \
    }
    QFX_CXX_LEAF(Conv1dImpl, "conv.Conv1d")
    QFX_CXX_LEAF(Conv2dImpl, "conv.Conv2d")
    QFX_CXX_LEAF(Conv3dImpl, "conv.Conv3d")
    QFX_CXX_LEAF(ConvTranspose2dImpl, "conv.ConvTranspose2d")
    QFX_CXX_LEAF(LinearImpl, "linear.Linear")
    QFX_CXX_LEAF(BatchNorm1dImpl, "batchnorm.BatchNorm1d")
    QFX_CXX_LEAF(BatchNorm2dImpl, "batchnorm.BatchNorm2d")
    QFX_CXX_LEAF(BatchNorm3dImpl, "batchnorm.BatchNorm3d")
#undef QFX_CXX_LEAF
    if (leaf.fn) leaves.emplace(item.key(), std::move(leaf));
  }
  const size_t n_inputs = example_inputs.size();
  torch::jit::Stack stack = example_inputs;
  for (const auto& t : tensors) stack.push_back(t.tensor);

  const bool was_training = module->is_training();
  struct RestoreMode {
    torch::nn::Module& m;
    bool on;
    ~RestoreMode() { m.train(on); }
  } restore{*module, was_training};
  module->eval();
  std::shared_ptr<torch::jit::tracer::TracingState> state;
  try {
    auto result = torch::jit::tracer::trace(
        stack,
        [&](torch::jit::Stack in) -> torch::jit::Stack {
          in.resize(n_inputs);
          return {forward(std::move(in))};
        },
        [](const at::Tensor&) { return std::string(); }, /*strict=*/false);
    state = result.first;
  } catch (const c10::Error& e) {
    throw TraceError(std::string("libtorch's tracer failed on the C++ module: ") + e.what_without_backtrace());
  }

  TraceImpl impl(torch::jit::Module(), options.wrap, options.max_unroll);
  auto gm = impl.run_cxx(*state->graph, n_inputs, std::move(tensors), std::move(leaves));
  gm->train(was_training);
  return gm;
}

// ---- fx::wrap ---------------------------------------------------------------------

namespace {

struct WrapKernel : c10::OperatorKernel {
  explicit WrapKernel(std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)> f) : fn(std::move(f)) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    std::vector<at::Tensor> inputs = torch::jit::pop(*stack).toTensorVector();
    torch::jit::push(*stack, c10::IValue(fn(inputs)));
  }
  std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)> fn;
};

std::mutex& wrap_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::unique_ptr<torch::Library>>& wrap_libraries() {
  static std::vector<std::unique_ptr<torch::Library>> libs;
  return libs;
}

}  // namespace

WrappedFunction wrap(const std::string& name,
                     std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)> fn) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos) {
    throw ConfigError("fx::wrap: '" + name + "' is not an identifier");
  }
  const std::string op = "qfx_wrap::" + name;
  std::lock_guard<std::mutex> lock(wrap_mutex());
  if (c10::Dispatcher::singleton().findSchema({op, ""})) throw ConfigError("fx::wrap: '" + name + "' is already registered");
  auto lib = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "qfx_wrap", c10::nullopt, __FILE__, __LINE__);
  lib->def((name + "(Tensor[] inputs) -> Tensor[]").c_str());
  lib->impl(name.c_str(), torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd,
                                          torch::CppFunction::makeFromBoxedFunctor(std::make_unique<WrapKernel>(std::move(fn)))));
  wrap_libraries().push_back(std::move(lib));
  WrappedFunction w;
  w.op_name_ = op;
  w.handle_ = c10::Dispatcher::singleton().findSchemaOrThrow(op.c_str(), "").typed<WrappedFunction::Signature>();
  return w;
}

std::vector<at::Tensor> WrappedFunction::operator()(const std::vector<at::Tensor>& inputs) const {
  return handle_->call(inputs);
}

at::Tensor WrappedFunction::operator()(const at::Tensor& input) const { return (*this)(std::vector<at::Tensor>{input}).at(0); }

QuantizationTracer::QuantizationTracer(TracerOptions options) : options_(std::move(options)) {}

std::shared_ptr<GraphModule> QuantizationTracer::trace(torch::jit::Module module) {
  std::vector<WrapSpec> all = options_.wrap;
  if (options_.use_model_annotations) collect_model_wraps(module, all);
  effective_.clear();
  for (const auto& w : all) {
    bool dup = false;
    for (const auto& e : effective_) dup = dup || (e.kind == w.kind && e.name == w.name);
    if (!dup) effective_.push_back(w);
  }
  if (!module.find_method("forward")) throw TraceError("the TorchScript module has no forward method");
  TraceImpl impl(module, effective_, options_.max_unroll, options_.input_shapes, options_.input_dtypes);
  auto gm = impl.run();
  gm->set_script_root(module._ivalue());
  return gm;
}

std::shared_ptr<GraphModule> trace_file(const std::string& path, const TracerOptions& options) {
  QuantizationTracer tracer(options);
  for (const auto& lib : options.libraries) load_operator_library(lib);
  if (is_exported_program(path)) return load_exported_program(path);  // torch.export: already a graph
  if (is_onnx_model(path)) {                                           // ONNX: a graph of ONNX ops
    OnnxModelOptions o;
    o.input_shapes = options.input_shapes;
    return load_onnx_model(path, o);
  }
  auto module = load_torchscript(path);
  try {
    return tracer.trace(module);
  } catch (const TraceError& e) {
    throw TraceError(path + ": " + e.what());
  }
}

}  // namespace qfx::fx
