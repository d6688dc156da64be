// Internal: the core of export_onnx's exporter (one GraphModule node at a time):
// the ONNX building helpers, the graph's inputs, outputs, parameters, Q/DQ pairs and
// quantized layers, and the dispatch of every other node to its op catalog record's
// emission. The helpers of one op family live with that family (export_*_ops.cpp;
// export_shape.h and export_rnn.h for the ones other families use too).
#pragma once

#include "qfx/quant/convert.h"

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "qfx/error.h"
#include "qfx/fx/module_matcher.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/op_catalog.h"
#include "qfx/quant/op_names.h"
#include "qfx/quant/quantized_modules.h"
#include "qfx/runtime/model.h"

#include "batch_shapes.h"

namespace qfx::quant::detail {

/// ONNX TensorProto data types newer than the onnx.proto qfx builds against
/// (onnx.ai/onnx/repo-docs/IR.md): 4-bit integers, packed two per byte.
constexpr int kOnnxUInt4 = 21;
constexpr int kOnnxInt4 = 22;

/// Throws UnsupportedOpError naming node `n`, its target and `why`.
[[noreturn]] inline void unsupported(const fx::Node& n, const std::string& why) {
  throw UnsupportedOpError("export_onnx: node '" + n.name() + "' (" + n.target() + "): " + why);
}

/// export_onnx's per-graph state. Its members are public: the op catalog's
/// emissions (the family files' register_*_ops) read and extend the state.
class Exporter {
 public:
  /// An empty ModelProto (IR 8, default-domain opset `o.opset`, o.metadata) for `gm`.
  Exporter(fx::GraphModule& gm, const ExportOptions& o, ExportResult& r);
  /// Exports every node in graph order. Throws UnsupportedOpError for a node qfx
  /// cannot express, InternalError for an emission writing an ONNX op its record
  /// does not declare (OpRecord::onnx_ops).
  void run();
  /// The serialized ModelProto; throws IoError if protobuf cannot serialize it.
  std::string bytes();
  /// Drops initializers no node reads (a parameter whose only reader became the
  /// DequantizeLinear of its integer codes).
  void prune_initializers();

  // --- ONNX building helpers (exporter.cpp) ------------------------------------------
  /// `hint` + "_" + a counter: a value name not used before.
  std::string fresh(const std::string& hint) { return hint + "_" + std::to_string(counter_++); }
  /// Appends node `op` (default domain) reading `in`, writing `out`, named `name` (made
  /// unique with fresh() when a node of the model has that name already: ONNX requires it).
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::string& out, const std::string& name);
  static void attr_i(onnx::NodeProto* p, const std::string& k, int64_t v);
  static void attr_f(onnx::NodeProto* p, const std::string& k, float v);
  static void attr_ints(onnx::NodeProto* p, const std::string& k, const std::vector<int64_t>& v);
  static void attr_s(onnx::NodeProto* p, const std::string& k, const std::string& v);
  /// An initializer holding `t` (float, int8/16/32/64, uint8), named fresh(hint).
  std::string init(const std::string& hint, const at::Tensor& t);
  /// An int64 initializer (shapes, axes, Slice bounds).
  std::string ints_init(const std::string& hint, const std::vector<int64_t>& v) { return init(hint, at::tensor(v, at::kLong)); }
  /// The `axes` of Reduce* node `p` (not ReduceSum, whose axes are an input from opset
  /// 13): an attribute below opset 18, the optional second input from 18 on.
  void reduce_axes(onnx::NodeProto* p, const std::vector<int64_t>& axes);
  /// The DequantizeLinear of a weight's integer `codes` under `q`, stored with its
  /// output channels along `channel_axis` (0: [C, K] as Gemm transB reads it; 1: the
  /// transposed [K, C] MatMul reads): per tensor, per channel (`axis`), or block-wise
  /// over the other (input-channel) axis, ONNX DequantizeLinear-21's `block_size` with
  /// scale / zero point [C, nb] (transposed alike) and 2- to 4-bit codes stored as
  /// packed INT4 / UINT4 (onnx.ai "Type Int4": two per byte, the first in the low
  /// nibble). Returns the dequantized value's name. Throws UnsupportedOpError naming
  /// `hint` for a block-wise weight below opset 21.
  std::string dequantize_weight(const std::string& hint, const at::Tensor& codes, const QParams& q, int64_t channel_axis);
  /// An initializer of 4-bit codes (int8 values in [-8, 7], or uint8 in [0, 15]) as
  /// ONNX INT4 / UINT4, packed two per byte (low nibble first, an odd count padded).
  std::string init_4bit(const std::string& hint, const at::Tensor& codes);
  /// The zero points of `q` in its container type (uint8, int8, int16).
  at::Tensor zero_points(const QParams& q);
  /// int16 Q/DQ: ONNX Runtime's com.microsoft QuantizeLinear / DequantizeLinear
  /// (standard ONNX has int16 only from opset 21), imported once.
  void microsoft_domain(onnx::NodeProto* p);
  /// A node `op`(a, b) writing a fresh value named after `name`; returns that value.
  std::string two_input(const char* op, const std::string& a, const std::string& b, const std::string& name);

  // --- arguments ----------------------------------------------------------------------
  /// The ONNX value of tensor argument `a` of `user`.
  const std::string& value(const fx::Node& user, const fx::Argument& a);
  /// The rank exported for `a`, -1 when unknown.
  int rank_of(const fx::Argument& a);
  /// Argument `i` as an int list (an int is a list of one); unsupported() otherwise.
  std::vector<int64_t> ints_arg(const fx::Node& n, size_t i);
  /// Argument `i` as a number (bools 0 / 1), `def` when absent or of another type.
  double num_arg(const fx::Node& n, size_t i, double def);
  /// A tensor or a number (a 0-d float initializer) as an ONNX value.
  std::string operand(const fx::Node& n, const fx::Argument& a);

  // --- dtypes (export_dtypes.cpp) ---------------------------------------------------------
  /// The scalar type of tensor argument `a` as shape propagation found it (meta
  /// "dtype", when it ran) or as the program or trace recorded it (meta
  /// "traced_dtype"); for a number, kLong, kDouble or kBool; nullopt when unknown
  /// (a node a pass inserted: promotion then takes it as float).
  /// float64 and float16 values count as kFloat: the exported model computes in float32.
  std::optional<at::ScalarType> dtype_of(const fx::Argument& a);
  /// torch's type promotion (at::result_type) over arguments [from, to) of `n`: 0-d
  /// tensors and numbers take part as scalars do. kFloat when a dtype is unknown.
  at::ScalarType promoted(const fx::Node& n, size_t from, size_t to);
  /// Argument `a` of `n` as an ONNX value of type `t`: a tensor of another dtype through
  /// ONNX Cast (to bool: x != 0), a number as a 0-d initializer of `t`.
  std::string operand_as(const fx::Node& n, const fx::Argument& a, at::ScalarType t);
  /// Argument 0 of `n` as an ONNX value in the type its `dtype` keyword names (sum,
  /// mean, prod, cumsum: the input is cast first, as aten does); without one, as is.
  std::string input_in_dtype(const fx::Node& n);
  /// The ONNX TensorProto element type of `t`; -1 for a type ONNX export does not write.
  static int onnx_type(at::ScalarType t);

  // --- ops every family uses ----------------------------------------------------------
  /// An op on one tensor input (then `extra` constant inputs) whose output has the
  /// input's rank plus `rank_delta`; last_ is the node.
  void unary(fx::Node* n, const std::string& op, int rank_delta = 0, const std::vector<std::string>& extra = {});
  /// ONNX `op` over two operands (tensors or numbers) cast to torch's promoted type
  /// (comparisons: then compared; And / Or / Xor: as bool; Div: true division, in
  /// float for integers); Add / Sub scale the second by `alpha` (argument 2 or the
  /// keyword) when it is not 1.
  void binary(fx::Node* n, const std::string& op);
  /// An op that passes its input through (dropout and identity in eval mode).
  void alias(fx::Node* n);
  /// x * op(x) of n's input x (SiLU as Sigmoid, HardSwish as HardSigmoid); the op's
  /// value is fresh(n's name + hint). Returns the `op` node (for its attributes).
  onnx::NodeProto* gated(fx::Node* n, const std::string& op, const std::string& hint);

  // --- the graph's own pieces (exporter.cpp, export_outputs.cpp) -----------------------
  void input(fx::Node* n, size_t i);
  /// Every tensor of a (nested) output: a tuple, list or named tuple (GoogLeNet's
  /// GoogLeNetOutputs, detection heads) gives one ONNX output per tensor, in order;
  /// None and other constants (GoogLeNet's absent aux logits) are left out.
  static void flatten_outputs(const fx::Argument& a, std::vector<fx::Argument>* outs);
  /// A value name the graph already uses (a node output, an initializer or an input).
  bool name_taken(const std::string& name) const;
  /// Output i of `count`: the caller's name, a dictionary output's key ("out"), or
  /// "output" / "output_K".
  std::string output_name(size_t i, size_t count, const std::vector<std::string>& keys) const;
  void output(fx::Node* n);
  /// A parameter or buffer read by a function (F.linear's weight, a layer scale): an
  /// initializer, in float (a tensor of another dtype keeps its type).
  void attribute(fx::Node* n);
  /// A FakeQuantize of a prepared graph exported as the float model: a pass-through
  /// that records what it observes.
  void observed(fx::Node* n);
  /// QuantizeLinear -> DequantizeLinear for a QuantDequant (an activation;
  /// export_quant_dequant.cpp).
  void quant_dequant(fx::Node* n, const QuantDequant& qd);
  /// A QuantDequant of a parameter (get_attr) that only functional linears read as
  /// their weight (prepare_fx's weight FakeQuantize of F.linear).
  static bool weight_of_functional_linear(const fx::Node* n);
  /// A (fused, quantized) conv / linear layer: Conv, ConvTranspose, Gemm or MatMul +
  /// Add over dequantized weights, then its fused activation (export_layer_ops.cpp).
  void weighted(fx::Node* n, const QuantizedConvLinear& f);
  /// The fused activation `a` after value `x` of node `n`; returns the result's value.
  std::string activation(fx::Node* n, const std::string& x, FusedActivation a);
  void module(fx::Node* n);
  /// A call_function node: the op catalog's emission of its canonical op.
  void function(fx::Node* n);
  /// Throws UnsupportedOpError when call `n` passes a keyword argument that record
  /// `r` does not read (OpRecord::kwargs) at a value other than its schema default
  /// (export_kwargs.cpp).
  void check_kwargs(const fx::Node& n, const OpRecord* r);
  /// The op catalog's record and emission of `op` at the exported opset (what: "op"
  /// or "module"); unsupported() when there is none.
  std::pair<const OpRecord*, const OnnxExport*> emission(const fx::Node& n, const std::string& op, const std::string& what);

  // --- constant folding (export_constants.cpp) ------------------------------------------
  /// True for get_attr and aten ops reading only such nodes; fold_constant evaluates
  /// one and stores it as an initializer.
  bool constant_node(const fx::Node* n);
  void fold_constant(fx::Node* n);
  /// True for a constant node (constant_node) whose value is an integer or bool
  /// tensor: exported as its value (an initializer), not as ONNX ops on int64 data.
  bool integer_constant(fx::Node* n);
  void evaluate_constants();  // every constant node's value, in one run (folded_)

  fx::GraphModule& gm_;
  const ExportOptions& opt_;
  ExportResult& res_;
  onnx::ModelProto model_;
  onnx::GraphProto* g_;
  onnx::NodeProto* last_ = nullptr;
  std::map<const fx::Node*, std::string> names_;
  std::map<const fx::Node*, int> rank_;
  std::map<const fx::Node*, bool> constant_;  // constant_node's answers
  std::map<std::string, at::Tensor> folded_;   // evaluate_constants: node name -> value
  std::map<std::string, std::vector<at::Tensor>> folded_lists_;  // ... of the ops that return tensors (meshgrid)
  bool folded_ready_ = false;
  int counter_ = 0;
  bool ms_imported_ = false;  // com.microsoft opset imported (int16 Q/DQ)
  std::set<std::string> node_names_;  // names of the nodes written so far
  fx::Node* first_input_ = nullptr;  // the first graph input (its dim 0: the dynamic batch)
  // Shape arithmetic (export_shape.h): static at export (batch_shapes); the dynamic
  // batch stays symbolic.
  std::map<const fx::Node*, std::vector<Dim>> dims_;  // batch_shapes, computed on first need
  bool have_dims_ = false;
  std::map<const fx::Node*, Dim> ints_;                     // int values (sizes and arithmetic)
  std::map<const fx::Node*, std::vector<Dim>> int_lists_;  // size() lists
  std::map<const fx::Node*, std::vector<std::string>> tuple_items_;  // chunk pieces, a recurrent layer's outputs
  /// The record whose emission runs (node() checks what it writes), null in the core.
  const OpRecord* emitting_ = nullptr;
};

}  // namespace qfx::quant::detail
