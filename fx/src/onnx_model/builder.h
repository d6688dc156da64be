// Internal: builds a GraphModule from an ONNX graph, one converter per op type.
// Every node the builder creates is run at once on two shadow inputs that
// differ only in their dynamic dims: their shapes give each value's rank and
// which of its dims are dynamic, and nodes over constants fold to constants.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/fx/onnx_model.h"
#include "qfx/fx/serialize.h"

namespace qfx::fx::onnx_detail {

/// What an ONNX value is while the graph is built.
struct Value {
  Node* node = nullptr;        ///< computed in the graph (a tensor, or an int for a shape element)
  at::Tensor constant;         ///< known at load time (initializer, Constant, folded)
  std::vector<Argument> sym;   ///< a 1-D int64 shape vector with run-time elements: const ints and int nodes
  bool sym_scalar = false;     ///< `sym` holds one element and the value is 0-d
};

class Builder;
/// Converts the builder's current node: reads its inputs, emits graph nodes,
/// binds its outputs.
using Converter = std::function<void(Builder&)>;
using ConverterTable = std::map<std::string, Converter>;
/// The converters by ONNX op type, filled once from the ops_*.cpp files.
const ConverterTable& converters();
void add_layer_ops(ConverterTable& t);        ///< ops_layers.cpp
void add_elementwise_ops(ConverterTable& t);  ///< ops_elementwise.cpp
void add_shape_ops(ConverterTable& t);        ///< ops_shape.cpp
void add_spatial_ops(ConverterTable& t);      ///< ops_spatial.cpp (pooling, Resize, Pad)

class Builder {
 public:
  Builder(const onnx::ModelProto& m, std::string path, const OnnxModelOptions& o);
  ~Builder();
  std::shared_ptr<GraphModule> build();

  // --- the node being converted ---
  const onnx::NodeProto& node() const { return *cur_; }
  int64_t opset() const { return opset_; }
  /// True if input `i` is given (present and not the empty name).
  bool has_input(size_t i) const;
  const Value& in(size_t i) const;
  /// Input `i` as a tensor node (a get_attr for a constant); fails for a shape vector.
  Node* tensor(size_t i);
  /// A value as a node: its own, or a new get_attr for a constant; fails for a shape.
  Node* node_of(const Value& v);
  /// Input `i` as a constant; fails naming `what` when it is computed at run time.
  at::Tensor constant(size_t i, const std::string& what) const;
  /// Input `i` (an int64 vector) as an int-list argument: constants, or aten::size nodes.
  Argument ints(size_t i);
  /// The shape of input `i` on the first shadow, -1 where the dim is dynamic.
  std::vector<int64_t> shape(size_t i) const;
  int64_t rank(size_t i) const { return static_cast<int64_t>(shape(i).size()); }
  /// An int argument for dim `d` of input `i`: the constant, or an aten::size node.
  Argument dim(size_t i, int64_t d);

  // --- emitting ---
  /// A call_function node over registered operator `target`, run on the shadows
  /// (folded to a constant when it reads no run-time value).
  Value call(const std::string& target, std::vector<Argument> args, std::vector<std::pair<std::string, Argument>> kwargs = {});
  /// A rebuilt module at a path derived from `weight` (its PyTorch path) or the node name.
  Value module(const std::string& cls, LoadedModule m, Node* x, const std::string& weight);
  /// The node's tensor attribute `name` (Constant's value), or undefined.
  at::Tensor attr_tensor(const std::string& name) const;
  /// The value of ONNX value `name` (computed by an earlier node).
  const Value& value_named(const std::string& name) const { return values_.at(name); }
  /// The constant held by ONNX value `name`, or an undefined tensor.
  at::Tensor constant_named(const std::string& name) const;
  /// Binds output `k` to the value of input `i` unchanged (Identity, Dropout).
  void forward_input(size_t k, size_t i) { bind(k, in(i)); }
  /// A value for `v` that is a constant tensor.
  static Value constant_value(at::Tensor t);
  void bind(size_t output, Value v);
  bool rebuild_modules() const { return o_.rebuild_modules; }
  /// The node that computes input `i`, or nullptr (a graph input or initializer).
  const onnx::NodeProto* producer(size_t i) const;
  /// The single node consuming output `k` of `n` (default: the current node), or nullptr.
  const onnx::NodeProto* sole_consumer_of(const onnx::NodeProto& n, size_t k) const;
  /// The single node consuming output `k` of the current node, or nullptr.
  const onnx::NodeProto* sole_consumer(size_t k) const;
  /// Marks a later node as converted by the current one (its output is `v`).
  void absorb(const onnx::NodeProto& later, Value v);

  /// UnsupportedOpError naming the file, the node and its op type: a valid model qfx cannot read.
  [[noreturn]] void fail(const std::string& why) const;
  /// IoError naming the file, the node and its op type: the model breaks the ONNX spec.
  [[noreturn]] void invalid(const std::string& why) const;
  /// `a` (negative: from the end) as a dim of a rank-`rank` tensor; invalid() when out of range.
  int64_t axis(int64_t a, int64_t rank, const std::string& what) const;
  /// The int-list attribute `name` (or `def`), which must hold `n` values.
  std::vector<int64_t> attr_ints_n(const std::string& name, size_t n, std::vector<int64_t> def) const;
  /// invalid() unless a tensor of `shape` has at most kMaxElements elements (no
  /// allocation a file can make unbounded).
  void check_size(const std::vector<int64_t>& shape, const std::string& what) const;
  static constexpr int64_t kMaxElements = int64_t{1} << 30;

 private:
  struct Shadows;
  void inputs();
  void initializers();
  void convert(const onnx::NodeProto& n);
  void outputs();
  void set_shape_meta(Node* n);
  Node* constant_node(const at::Tensor& c, const std::string& hint, bool trainable);
  std::string unique_path(const std::string& hint);
  bool nests_with_a_layer(const std::string& p) const;
  Value fold_or_keep(Node* n);

  const onnx::ModelProto& m_;
  std::string path_, dir_;
  const OnnxModelOptions& o_;
  int64_t opset_ = 0;
  std::shared_ptr<GraphModule> gm_;
  Graph& g_;
  std::unique_ptr<Shadows> sh_;
  std::map<std::string, Value> values_;
  std::set<std::string> initializer_names_;
  std::map<std::string, std::vector<const onnx::NodeProto*>> consumers_;
  std::map<std::string, const onnx::NodeProto*> producers_;
  std::map<const onnx::NodeProto*, Value> absorbed_;
  std::map<std::string, int> paths_;
  std::set<std::string> layer_paths_;  // modules rebuilt so far
  const onnx::NodeProto* cur_ = nullptr;
};

/// Symmetric padding per spatial dim from the node's ONNX pads (begin..., end...)
/// and auto_pad; asymmetric pads become a constant_pad_nd of `pad_value` before
/// the layer (`*x` is replaced) and zeros are returned.
std::vector<int64_t> symmetric_pads(Builder& b, Node** x, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                    const std::vector<int64_t>& dilations, double pad_value);

/// The elements of a 0-d / 1-D integer value (a shape, an index): constants as
/// int IValues, run-time ones as int nodes; nullopt for a tensor computed at run
/// time or a float constant.
std::optional<std::vector<Argument>> shape_elements(const Value& v);
/// A value of `e`: a constant int64 tensor when every element is a constant
/// (0-d when `scalar`), else a shape value.
Value shape_value(std::vector<Argument> e, bool scalar);

/// An int-list argument of `e`: a constant list when every element is a constant,
/// else a list argument over the int nodes.
Argument int_list(const std::vector<Argument>& e);

/// An ONNX TensorProto element type as a libtorch dtype; nullopt for others.
std::optional<at::ScalarType> scalar_type(int64_t onnx_type);

}  // namespace qfx::fx::onnx_detail
