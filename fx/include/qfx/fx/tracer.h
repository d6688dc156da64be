// QuantizationTracer: TorchScript module -> fx GraphModule, honouring wrap
// annotations (torch.fx symbolic tracing semantics; Horizon plugin's wrap).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/api/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// One wrap annotation: what to keep whole as a single node.
///
/// Text form (C++ API, YAML `tracer.wrap`, model attribute `__qfx_wrap__`):
/// - `method:NAME` — a method of any module (`_post_process`), or `method:PATH.NAME`
///   for the method of the module at PATH; becomes one call_method node.
/// - `function:NAME` — a TorchScript function (`topk_decode`, or its qualified
///   name `pkg.mod.topk_decode`) or an operator (`aten::argmax`, `ns::op`);
///   becomes one call_function node.
/// - `module_type:NAME` — every module of that class (`DecodeHead`, or qualified
///   `pkg.mod.DecodeHead`); becomes one call_module node.
/// - `module:PATH` — the module at dotted PATH (`head`, `backbone.layer4`).
/// - a bare NAME containing `::` is `function:NAME`; any other bare NAME matches
///   a method, function, module type or module path of that name.
struct WrapSpec {
  enum class Kind { kAny, kMethod, kFunction, kModuleType, kModule };
  Kind kind = Kind::kAny;
  std::string name;

  /// Parses the text form. Throws `qfx::ConfigError` for an unknown `kind:` prefix
  /// or an empty name.
  static WrapSpec parse(const std::string& text);
  /// The text form ("method:_post_process").
  std::string str() const;
};

/// Tracer settings.
struct TracerOptions {
  /// Wrap annotations from the caller (C++ API or YAML).
  std::vector<WrapSpec> wrap;
  /// Also honour `__qfx_wrap__` (List[str] attribute or constant) found on any
  /// module of the model.
  bool use_model_annotations = true;
  /// Upper bound on iterations when unrolling loops with a constant trip count.
  int64_t max_unroll = 4096;
  /// Operator libraries (.so) that `trace_file` loads before the archive
  /// (load_operator_library; YAML: model.libraries).
  std::vector<std::string> libraries;
  /// Shapes of forward's tensor inputs, in order (-1: a dynamic dimension, such
  /// as the batch; `qfx ptq` passes model.input_shape). With them the tracer
  /// specialises shapes as torch.jit.trace and torch.export with static shapes
  /// do: it runs every traced op also on example inputs (the dynamic dimension at
  /// 2 and at 3), and `dim()`, `size()`, `shape`, `len()` of traced values are
  /// constants when they come out the same for both, so branches and asserts on
  /// them fold; a value that depends on a dynamic dimension stays symbolic and a
  /// branch on it is a TraceError naming the line. Traced tensors get
  /// `meta["traced_shape"]` (-1 where dynamic). Empty: no specialisation.
  std::vector<std::vector<int64_t>> input_shapes;
  /// Element type of each input, in order ("float32", "int64", "int32"; missing:
  /// float32): the example inputs of integer inputs (token ids, masks) are ones.
  std::vector<std::string> input_dtypes;
};

/// Loads a TorchScript archive. Throws `qfx::IoError` naming `path` if the file is
/// missing, truncated, or not a TorchScript archive. An archive that calls a
/// torchvision operator loads torchvision's operator library first when it is
/// installed (load_torchvision_operators); an operator that no loaded library
/// registers is a `qfx::ConfigError` naming it and the key to set.
torch::jit::Module load_torchscript(const std::string& path);

/// Traces TorchScript modules (scripted or traced) into GraphModules.
///
/// - Standard torch.nn modules (Conv1d/2d/3d, ConvTranspose2d, Linear,
///   BatchNorm1d/2d/3d, ReLU, ReLU6, LeakyReLU, Hardswish, Hardsigmoid, SiLU, GELU,
///   Sigmoid, Tanh, Softmax, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Dropout,
///   Identity, Flatten, LayerNorm, Upsample) become call_module leaves backed by
///   native libtorch modules that share the original parameter and buffer
///   tensors (the TorchScript module is re-pointed at the same tensors).
/// - Other modules are traced through; their nodes carry dotted names
///   (`layer1.0.conv1`) and `meta["module_path"]`.
/// - aten ops become call_function nodes; operations on constants fold;
///   `self.training` folds to the module's mode at trace time (as torch.fx).
/// - If-statements on constants take their branch; loops with constant trip
///   counts unroll.
/// - Control flow on tensor values, module mutation and other constructs the
///   graph cannot express throw `qfx::TraceError` naming the source line, the
///   module path, and the wrap entry that would keep the construct whole.
///
/// The returned GraphModule keeps `module` alive (wrapped calls run its code)
/// and follows its `train()`/`eval()` into wrapped TorchScript code.
class QuantizationTracer {
 public:
  explicit QuantizationTracer(TracerOptions options = {});

  /// Traces `module.forward`. Throws `qfx::TraceError`.
  std::shared_ptr<GraphModule> trace(torch::jit::Module module);

  /// The wrap entries in force in the last `trace` (options + model annotations).
  const std::vector<WrapSpec>& effective_wrap() const { return effective_; }

 private:
  TracerOptions options_;
  std::vector<WrapSpec> effective_;
};

/// Convenience: `load_torchscript(path)` then `QuantizationTracer(options).trace`.
std::shared_ptr<GraphModule> trace_file(const std::string& path, const TracerOptions& options = {});

/// The forward of a C++ module, as a callable over IValues (torch::nn::Module has
/// no virtual forward): e.g. `[&](auto in) { return net->forward(in[0].toTensor()); }`.
using ForwardFn = std::function<c10::IValue(std::vector<c10::IValue>)>;

/// Traces a C++ `torch::nn::Module` through libtorch's JIT tracer with example
/// inputs (the module is traced in eval mode and its mode restored after).
///
/// - Conv1d/2d/3d, ConvTranspose2d, Linear and BatchNorm1d/2d/3d submodules come back as call_module
///   nodes on the *same* submodule objects (recognised by their parameters); other
///   parameters and buffers become get_attr nodes with dotted names.
/// - Functions registered with `fx::wrap` are recorded as one call_function node.
/// - Python-style control flow in C++ is specialised by the example inputs, as any
///   JIT trace is; `options.wrap` entries naming operators are honoured.
/// Throws `qfx::TraceError` if libtorch's tracer fails (message included).
std::shared_ptr<GraphModule> trace_module(std::shared_ptr<torch::nn::Module> module, const ForwardFn& forward,
                                          std::vector<c10::IValue> example_inputs, TracerOptions options = {});

/// A C++ function kept whole by the tracer (see `wrap`).
class WrappedFunction {
 public:
  /// Calls the function through the dispatcher (so the JIT tracer records one
  /// `qfx_wrap::NAME` node). Inputs and outputs: lists of tensors.
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& inputs) const;
  /// One tensor in, the first tensor out.
  at::Tensor operator()(const at::Tensor& input) const;
  /// The operator name, "qfx_wrap::NAME" (the call_function target in graphs).
  const std::string& op_name() const { return op_name_; }

 private:
  friend WrappedFunction wrap(const std::string&, std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>);
  using Signature = std::vector<at::Tensor>(at::TensorList);
  std::string op_name_;
  c10::optional<c10::TypedOperatorHandle<Signature>> handle_;  // resolved once, by wrap()
};

/// Registers `fn` as operator `qfx_wrap::NAME(Tensor[] inputs) -> Tensor[]`
/// (autograd flows through the ops `fn` calls) and returns a callable for model
/// code. Graphs traced from C++ record each call as one call_function node, and
/// GraphModules run it through the operator registry. `name` must be an
/// identifier; registering the same name twice throws `qfx::ConfigError`.
WrappedFunction wrap(const std::string& name,
                     std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)> fn);

}  // namespace qfx::fx
