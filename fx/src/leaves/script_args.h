// Internal: reading a standard torch.nn layer out of TorchScript — its class name
// and its hyper-parameters (the leaf records' `trace` side, see registry.h).
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/expanding_array.h>

#include <optional>
#include <string>
#include <vector>

namespace qfx::fx::detail {

/// "__torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d" -> "torch.nn.modules.conv.Conv2d":
/// every "___torch_mangle_<digits>." and the leading "__torch__." dropped.
std::string demangle_type(const std::string& qualified_name);
/// The class name alone: "Conv2d".
std::string short_type(const std::string& qualified_name);

/// One torch.nn module of a TorchScript file, as a leaf record reads it: the
/// hyper-parameters of a scripted module are class constants (torch.nn declares
/// them in `__constants__`); those of a traced module are the constant inputs of
/// the single aten op its forward calls.
class ScriptReader {
 public:
  /// Reads the forward graph of `sm` (which must have a forward method); `sm`
  /// stays referenced and is re-pointed at native tensors by `tie`.
  explicit ScriptReader(torch::jit::Module& sm);

  /// True for a scripted module (it has class constants), false for a traced one.
  bool scripted() const;
  /// The class constant or plain (non-tensor, non-module) attribute `name`, or nullopt.
  std::optional<c10::IValue> constant(const std::string& name) const;
  /// The traced forward's single compute op when its kind is one of `kinds`
  /// ("aten::conv2d"); nullptr when there is not exactly one op or it is another.
  torch::jit::Node* op(const std::vector<std::string>& kinds) const;
  /// True when the forward calls no compute op at all (nn.Identity traced).
  bool no_ops() const { return ops_.empty(); }
  /// Constant `constant_name`, else input `index` of the single op of a kind in
  /// `ops`; nullopt when neither is there.
  std::optional<c10::IValue> param(const char* constant_name, const std::vector<std::string>& ops,
                                   size_t index) const;
  /// The constant value of input `i` of `n` (a prim::Constant or a list of them), or nullopt.
  static std::optional<c10::IValue> input(torch::jit::Node* n, size_t i);

  /// True when attribute `name` is a tensor (a parameter or buffer).
  bool has_tensor(const std::string& name) const;
  /// Tensor attribute `name`. Throws c10::Error when it is absent.
  at::Tensor tensor(const std::string& name) const;
  /// Makes `native` (a parameter or buffer of the native module) and tensor
  /// attribute `name` one tensor: `native` takes its data and requires_grad, and
  /// the TorchScript module is re-pointed at `native`. No-op when either is absent.
  void tie(const std::string& name, at::Tensor& native) const;

 private:
  torch::jit::Module& sm_;
  std::vector<torch::jit::Node*> ops_;  // forward's nodes other than constants, attribute reads, lists, tuples
};

/// An int or int list/tuple hyper-parameter as `n` values (one value repeats).
/// Throws TraceError for another count.
std::vector<int64_t> script_ints(const c10::IValue& v, size_t n);

/// `script_ints(v, D)` as libtorch's option type.
template <size_t D>
torch::ExpandingArray<D> script_array(const c10::IValue& v) {
  const std::vector<int64_t> x = script_ints(v, D);
  return torch::ExpandingArray<D>(c10::IntArrayRef(x));
}

}  // namespace qfx::fx::detail
