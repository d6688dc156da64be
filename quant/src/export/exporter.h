// Internal: the ONNX exporter of export_onnx (one GraphModule node at a time),
// shared by export_onnx.cpp (graph, modules, functions) and export_shape_ops.cpp
// (shape arithmetic).
#pragma once

#include "qfx/quant/convert.h"

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <map>

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

[[noreturn]] inline void unsupported(const fx::Node& n, const std::string& why) {
  throw UnsupportedOpError("export_onnx: node '" + n.name() + "' (" + n.target() + "): " + why);
}

class Exporter {
 public:
  Exporter(fx::GraphModule& gm, const ExportOptions& o, ExportResult& r) : gm_(gm), opt_(o), res_(r) {
    model_.set_ir_version(8);
    model_.set_producer_name("qfx");
    auto* os = model_.add_opset_import();
    os->set_domain("");
    os->set_version(o.opset);
    g_ = model_.mutable_graph();
    g_->set_name("qfx_int8");
    for (const auto& [k, v] : o.metadata) {
      auto* p = model_.add_metadata_props();
      p->set_key(k);
      p->set_value(v);
    }
  }

  void run() {
    size_t placeholder_index = 0;
    for (fx::Node* n : gm_.graph().nodes()) {
      switch (n->op()) {
        case fx::Opcode::kPlaceholder: input(n, placeholder_index++); break;
        case fx::Opcode::kOutput: output(n); break;
        case fx::Opcode::kGetAttr: attribute(n); break;
        case fx::Opcode::kCallMethod: unsupported(*n, "a wrapped call cannot be expressed in ONNX; keep it out of the exported part");
        case fx::Opcode::kCallModule: module(n); break;
        case fx::Opcode::kCallFunction:
          try {
            function(n);
          } catch (const UnsupportedOpError&) {
            if (!constant_node(n)) throw;
            fold_constant(n);  // reads only parameters and buffers: its value is the export
          }
          break;
      }
    }
  }

  std::string bytes() {
    std::string b;
    if (!model_.SerializeToString(&b)) throw IoError("export_onnx: cannot serialize the ONNX model");
    return b;
  }

  // Below: the helpers and state the op catalog's emissions (the family files'
  // register_*_ops) use; the class is internal to export_onnx.

  // --- ONNX building helpers ---------------------------------------------------------
  std::string fresh(const std::string& hint) { return hint + "_" + std::to_string(counter_++); }

  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::string& out,
                        const std::string& name) {
    auto* p = g_->add_node();
    p->set_op_type(op);
    p->set_name(name);
    for (const auto& i : in) p->add_input(i);
    p->add_output(out);
    return p;
  }
  static void attr_i(onnx::NodeProto* p, const std::string& k, int64_t v) {
    auto* a = p->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_f(onnx::NodeProto* p, const std::string& k, float v) {
    auto* a = p->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_ints(onnx::NodeProto* p, const std::string& k, const std::vector<int64_t>& v) {
    auto* a = p->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }

  std::string init(const std::string& hint, const at::Tensor& t_in) {
    at::Tensor t = t_in.detach().contiguous();
    auto* tp = g_->add_initializer();
    const std::string name = fresh(hint);
    tp->set_name(name);
    for (auto d : t.sizes()) tp->add_dims(d);
    switch (t.scalar_type()) {
      case at::kFloat: tp->set_data_type(onnx::TensorProto::FLOAT); break;
      case at::kChar: tp->set_data_type(onnx::TensorProto::INT8); break;
      case at::kShort: tp->set_data_type(onnx::TensorProto::INT16); break;
      case at::kByte: tp->set_data_type(onnx::TensorProto::UINT8); break;
      case at::kInt: tp->set_data_type(onnx::TensorProto::INT32); break;
      case at::kLong: tp->set_data_type(onnx::TensorProto::INT64); break;
      default: throw UnsupportedOpError("export_onnx: cannot store a tensor of type " + std::string(c10::toString(t.scalar_type())));
    }
    tp->set_raw_data(std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()));
    return name;
  }

  // An int64 initializer (shapes, axes, Slice bounds).
  std::string ints_init(const std::string& hint, const std::vector<int64_t>& v) { return init(hint, at::tensor(v, at::kLong)); }

  at::Tensor zero_points(const QParams& q) {
    at::Tensor z = q.zero_point.to(at::kInt);
    return q.dtype == QDType::kUInt8 ? z.to(at::kByte) : q.dtype == QDType::kInt16 ? z.to(at::kShort) : z.to(at::kChar);
  }

  // int16 Q/DQ: ONNX Runtime's com.microsoft QuantizeLinear / DequantizeLinear
  // (standard ONNX has int16 only from opset 21), imported once.
  void microsoft_domain(onnx::NodeProto* p) {
    p->set_domain(runtime::kMicrosoftDomain);
    if (ms_imported_) return;
    auto* os = model_.add_opset_import();
    os->set_domain(runtime::kMicrosoftDomain);
    os->set_version(1);
    ms_imported_ = true;
  }

  // --- graph pieces -----------------------------------------------------------------
  const std::string& value(const fx::Node& user, const fx::Argument& a) {
    if (!a.is_node()) unsupported(user, "a non-tensor argument where a tensor is expected");
    auto it = names_.find(a.node);
    if (it == names_.end()) unsupported(user, "its input '" + a.node->name() + "' was not exported");
    return it->second;
  }

  int rank_of(const fx::Argument& a) {
    if (!a.is_node()) return -1;
    auto it = rank_.find(a.node);
    return it == rank_.end() ? -1 : it->second;
  }

  void input(fx::Node* n, size_t i) {
    if (i == 0) first_input_ = n;
    const std::string name = i < opt_.input_names.size() ? opt_.input_names[i] : n->name();
    auto* vi = g_->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    const std::string dtype = i < opt_.input_dtypes.size() ? opt_.input_dtypes[i] : "float32";
    tt->set_elem_type(dtype == "int64"   ? onnx::TensorProto::INT64
                      : dtype == "int32" ? onnx::TensorProto::INT32
                                         : onnx::TensorProto::FLOAT);
    if (i < opt_.input_shapes.size()) {
      auto* sh = tt->mutable_shape();
      for (auto d : opt_.input_shapes[i]) {
        auto* dim = sh->add_dim();
        if (d < 0) dim->set_dim_param("N");
        else dim->set_dim_value(d);
      }
      rank_[n] = static_cast<int>(opt_.input_shapes[i].size());
    }
    names_[n] = name;
  }

  // Every tensor of a (nested) output: a tuple, list or named tuple (GoogLeNet's
  // GoogLeNetOutputs, detection heads) gives one ONNX output per tensor, in order;
  // None and other constants (GoogLeNet's absent aux logits) are left out.
  static void flatten_outputs(const fx::Argument& a, std::vector<fx::Argument>* outs);
  // A value name the graph already uses (a node output, an initializer or an input).
  bool name_taken(const std::string& name) const;
  // Output i of `count`: the caller's name, a dictionary output's key ("out"), or
  // "output" / "output_K".
  std::string output_name(size_t i, size_t count, const std::vector<std::string>& keys) const;
  void output(fx::Node* n);

  // A parameter or buffer read by a function (F.linear's weight, a layer scale): an
  // initializer, in float (a tensor of another dtype keeps its type).
  void attribute(fx::Node* n) {
    if (read_by_rnn_only(n)) return;  // a recurrent layer's weight: exported reordered by rnn_function
    at::Tensor t = gm_.get_attr(n->target()).detach();
    if (t.is_floating_point()) t = t.to(at::kFloat);
    names_[n] = init(n->name(), t);
    rank_[n] = static_cast<int>(t.dim());
  }

  // A FakeQuantize of a prepared graph exported as the float model: a pass-through
  // that records what it observes.
  void observed(fx::Node* n) {
    if (read_by_rnn_only(n)) return;  // a recurrent layer's weight quantizer: rnn_function reads the weight
    const std::string& x = value(*n, n->args().at(0));
    res_.observed.push_back({n->target(), n->args().at(0).is_node() ? n->args().at(0).node->name() : n->name(), x});
    names_[n] = x;
    rank_[n] = rank_of(n->args().at(0));
  }

  // QuantizeLinear -> DequantizeLinear for a QuantDequant (an activation).
  void quant_dequant(fx::Node* n, const QuantDequant& qd);  // export_quant_dequant.cpp

  // A QuantDequant of a parameter (get_attr) that only functional linears read as
  // their weight (prepare_fx's weight FakeQuantize of F.linear).
  static bool weight_of_functional_linear(const fx::Node* n) {
    if (n->args().empty() || !n->args()[0].is_node() || n->args()[0].node->op() != fx::Opcode::kGetAttr || n->users().empty())
      return false;
    for (const fx::Node* u : n->users())
      if (u->op() != fx::Opcode::kCallFunction || u->target().rfind("aten::linear", 0) != 0 || u->args().size() < 2 ||
          !u->args()[1].is_node() || u->args()[1].node != n)
        return false;
    return true;
  }

  void weighted(fx::Node* n, const QuantizedConvLinear& f) {
    const fx::Argument& xa = n->args().at(0);
    const std::string& x = value(*n, xa);
    const int r = rank_of(xa);
    // A linear on an input of rank other than 2 is x @ W^T + b (MatMul, then Add):
    // W^T is stored, so the MatMul's B is a (per-channel: axis 1) dequantized constant.
    const bool matmul = f.op() == FusedConvLinear::Op::kLinear && r != 2;
    const at::Tensor codes = matmul ? f.weight_codes().t().contiguous() : f.weight_codes();
    std::string wname, bname;
    if (f.weight_quantized() && !opt_.float_model) {
      const QParams& q = f.weight_qparams();
      const std::vector<int64_t> vec = q.per_channel ? std::vector<int64_t>{-1} : std::vector<int64_t>{};
      const std::string wi = init(n->name() + "_weight_q", codes);
      const std::string ws = init(n->name() + "_weight_scale", q.scale.reshape(vec));
      const std::string wz = init(n->name() + "_weight_zero_point", zero_points(q).reshape(vec));
      wname = fresh(n->name() + "_weight");
      auto* dn = node("DequantizeLinear", {wi, ws, wz}, wname, wname);
      if (q.per_channel) attr_i(dn, "axis", matmul ? 1 : f.weight_out_axis());
      ++res_.quantized_weights;
      if (f.bias_codes().defined()) {  // int32 bias, scale = input scale x weight scale
        const std::string bi = init(n->name() + "_bias_q", f.bias_codes());
        const std::string bsn = init(n->name() + "_bias_scale", f.bias_scale());
        const std::string bz = init(n->name() + "_bias_zero_point", at::zeros({f.bias_codes().numel()}, at::kInt));
        bname = fresh(n->name() + "_bias");
        auto* bn = node("DequantizeLinear", {bi, bsn, bz}, bname, bname);
        attr_i(bn, "axis", 0);
      }
    } else {
      wname = init(n->name() + "_weight", matmul ? f.weight().t().contiguous() : f.weight());
    }
    const at::Tensor w = f.weight_codes();
    if (bname.empty()) bname = init(n->name() + "_bias", f.bias_float());
    std::string y = fresh(n->name());
    if (f.op() == FusedConvLinear::Op::kLinear) {
      if (!matmul) {
        auto* p = node("Gemm", {x, wname, bname}, y, n->name());
        attr_i(p, "transB", 1);
      } else {  // any rank: x @ W^T + b
        const std::string mm = fresh(n->name() + "_matmul");
        node("MatMul", {x, wname}, mm, mm);
        node("Add", {mm, bname}, y, n->name());
      }
    } else {
      const bool tr = f.op() == FusedConvLinear::Op::kConvTranspose;
      auto* p = node(tr ? "ConvTranspose" : "Conv", {x, wname, bname}, y, n->name());
      std::vector<int64_t> k(w.sizes().begin() + 2, w.sizes().end()), pads = f.padding();
      pads.insert(pads.end(), f.padding().begin(), f.padding().end());
      attr_ints(p, "kernel_shape", k);
      attr_ints(p, "strides", f.stride());
      attr_ints(p, "pads", pads);
      attr_ints(p, "dilations", f.dilation());
      attr_i(p, "group", f.groups());
      if (tr) attr_ints(p, "output_padding", f.output_padding());
    }
    y = activation(n, y, f.activation());
    names_[n] = y;
    rank_[n] = r;
  }

  std::string activation(fx::Node* n, const std::string& x, FusedActivation a) {
    if (a == FusedActivation::kNone) return x;
    const std::string y = fresh(n->name() + "_act");
    if (a == FusedActivation::kReLU) {
      node("Relu", {x}, y, y);
    } else {
      node("Clip", {x, init("zero", at::full({}, 0.0f)), init("six", at::full({}, 6.0f))}, y, y);
    }
    return y;
  }

  // An op on one tensor input (then `extra` constant inputs) whose output has the
  // input's rank plus `rank_delta`.
  void unary(fx::Node* n, const std::string& op, int rank_delta = 0, const std::vector<std::string>& extra = {}) {
    const std::string y = fresh(n->name());
    std::vector<std::string> in = {value(*n, n->args().at(0))};
    in.insert(in.end(), extra.begin(), extra.end());
    last_ = node(op, in, y, n->name());
    names_[n] = y;
    const int r = rank_of(n->args().at(0));
    rank_[n] = r < 0 ? -1 : r + rank_delta;
  }

  // SiLU as x * Sigmoid(x); HardSwish, below opset 14, as x * HardSigmoid(x)
  // (export_activation_ops.cpp).
  void silu(fx::Node* n);
  void hardswish(fx::Node* n);
  /// PyTorch's hardsigmoid: ONNX HardSigmoid with alpha 1/6 (beta 0.5).
  void hardsigmoid(fx::Node* n) {
    unary(n, "HardSigmoid");
    attr_f(last_, "alpha", 1.0f / 6.0f);
  }

  // An op that passes its input through (dropout and identity in eval mode).
  void alias(fx::Node* n) {
    names_[n] = value(*n, n->args().at(0));
    rank_[n] = rank_of(n->args().at(0));
  }

  void clip(fx::Node* n, float lo, float hi) {
    const std::string y = fresh(n->name());
    node("Clip", {value(*n, n->args().at(0)), init("lo", at::full({}, lo)), init("hi", at::full({}, hi))}, y, n->name());
    names_[n] = y;
    rank_[n] = rank_of(n->args().at(0));
  }

  void pool(fx::Node* n, bool max, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
            std::vector<int64_t> d, bool ceil, bool include_pad) {
    if (s.empty()) s = k;
    unary(n, max ? "MaxPool" : "AveragePool");
    attr_ints(last_, "kernel_shape", k);
    attr_ints(last_, "strides", s);
    std::vector<int64_t> pads = p;
    pads.insert(pads.end(), p.begin(), p.end());
    attr_ints(last_, "pads", pads);
    if (max && !d.empty() && d != std::vector<int64_t>(d.size(), 1)) attr_ints(last_, "dilations", d);
    if (ceil) attr_i(last_, "ceil_mode", 1);
    if (!max && include_pad) attr_i(last_, "count_include_pad", 1);
  }

  void module(fx::Node* n) {
    auto m = gm_.get_submodule(n->target());
    if (auto* qd = dynamic_cast<QuantDequant*>(m.get())) return quant_dequant(n, *qd);
    if (auto* q = dynamic_cast<QuantizedConvLinear*>(m.get())) return weighted(n, *q);
    if (dynamic_cast<FakeQuantize*>(m.get())) {
      if (!opt_.float_model) unsupported(*n, "a FakeQuantize in the graph: export the output of convert_fx");
      return observed(n);
    }
    if (auto* f = dynamic_cast<FusedConvLinear*>(m.get())) {
      if (!opt_.float_model) unsupported(*n, "a prepared FusedConvLinear in the graph: export the output of convert_fx");
      return weighted(n, QuantizedConvLinear(*f, /*quantize_weight=*/false, -1.0f));
    }
    const std::string op = canonical_op_name(*n, gm_);
    const OnnxExport& x = emission(*n, op, "module");
    if (x.module) return x.module(*this, *n, *m);
    // Called with the function's arguments (ReLU(x) as relu(x)): only for a class
    // the op's record lists.
    if (op_catalog().name_of_module(fx::module_type_name(*n, gm_)) != op || !x.function)
      unsupported(*n, "module '" + op + "' has no ONNX export in qfx yet");
    x.function(*this, *n);
  }

  // The op catalog's emission of `op` at the exported opset; what: "op" or "module".
  const OnnxExport& emission(const fx::Node& n, const std::string& op, const std::string& what) {
    if (const OnnxExport* x = op_catalog().onnx_export(op, opt_.opset)) return *x;
    const OpRecord* r = op_catalog().find(op);
    if (r && !r->onnx.empty())
      unsupported(n, what + " '" + op + "' needs ONNX opset " + std::to_string(r->onnx.front().since_opset) +
                         " or newer (exporting opset " + std::to_string(opt_.opset) + ")");
    unsupported(n, what + " '" + op + "' has no ONNX export in qfx yet");
  }

  // A weighted layer module that prepare_fx left float (not fused, not observed).
  void float_layer(fx::Node* n) {
    const std::string op = canonical_op_name(*n, gm_);
    std::string why;
    auto f = FusedConvLinear::create(gm_.get_submodule(n->target()), nullptr, FusedConvLinear::BnMode::kFold, FusedActivation::kNone, &why);
    if (!f) unsupported(*n, why);
    res_.float_ops.push_back(n->name() + " (" + op + "): float weights (not prepared for int8)");
    weighted(n, QuantizedConvLinear(*f, /*quantize_weight=*/false, -1.0f));
  }

  std::vector<int64_t> ints_arg(const fx::Node& n, size_t i) {
    if (i >= n.args().size() || !n.args()[i].is_const()) unsupported(n, "argument " + std::to_string(i) + " must be a constant");
    const auto& v = n.args()[i].value;
    if (v.isInt()) return {v.toInt()};
    if (v.isIntList()) return v.toIntVector();
    unsupported(n, "argument " + std::to_string(i) + " must be an int or int list");
  }
  double num_arg(const fx::Node& n, size_t i, double def) {
    if (i >= n.args().size()) return def;
    const auto& a = n.args()[i];
    if (!a.is_const()) unsupported(n, "argument " + std::to_string(i) + " must be a constant");
    if (a.value.isDouble()) return a.value.toDouble();
    if (a.value.isInt()) return static_cast<double>(a.value.toInt());
    if (a.value.isBool()) return a.value.toBool() ? 1.0 : 0.0;
    return def;
  }

  std::string operand(const fx::Node& n, const fx::Argument& a) {
    if (a.is_node()) return value(n, a);
    if (a.is_const() && (a.value.isDouble() || a.value.isInt()))
      return init("scalar", at::full({}, static_cast<float>(a.value.isDouble() ? a.value.toDouble() : a.value.toInt())));
    if (a.is_const() && a.value.isTensor())  // a constant torch.jit.trace recorded (-10000.0 of an attention mask)
      return init("constant", a.value.toTensor().detach().to(at::kFloat));
    unsupported(n, "an operand that is neither a tensor nor a number");
  }

  void binary(fx::Node* n, const std::string& op) {
    if ((op == "Add" || op == "Sub") && n->args().size() > 2 && num_arg(*n, 2, 1.0) != 1.0) unsupported(*n, "alpha != 1");
    const std::string y = fresh(n->name());
    node(op, {operand(*n, n->args().at(0)), operand(*n, n->args().at(1))}, y, n->name());
    names_[n] = y;
    rank_[n] = std::max(rank_of(n->args().at(0)), rank_of(n->args().at(1)));
  }

  // --- transformer ops (export_transformer_ops.cpp): F.linear on a parameter.
  void functional_linear(fx::Node* n);
  // LayerNorm over the last `dims` axes; weight / bias: ONNX value names or empty.
  void layer_norm(fx::Node* n, int64_t dims, const std::string& weight, const std::string& bias, double eps);
  // (x - mean) / sqrt(var + eps) over `axes` of value `x` (statistics kept per the other axes).
  std::string normalize(const std::string& x, const std::string& base, const std::vector<int64_t>& axes, double eps);
  // GroupNorm / InstanceNorm (export_norm_ops.cpp): the per-channel affine ([C]
  // weight and bias broadcast over [N, C, ...]) after the normalisation.
  void channel_affine(fx::Node* n, std::string y, const fx::Argument* weight, const fx::Argument* bias, int rank);
  void gelu(fx::Node* n, bool tanh);
  // A node `op`(a, b) writing a fresh value named after `name`; returns that value.
  std::string two_input(const char* op, const std::string& a, const std::string& b, const std::string& name);

  // --- shape arithmetic: size(), the ints computed from it, view with computed
  // shapes, chunk. Static at export (batch_shapes); the dynamic batch stays
  // symbolic. Defined in export_shape_ops.cpp.
  const std::vector<Dim>& dims_of(const fx::Node& user, const fx::Argument& a);
  bool is_int(const fx::Argument& a) const;
  Dim int_of(const fx::Node& user, const fx::Argument& a);
  static int64_t norm_dim(const fx::Node& n, int64_t d, size_t rank);
  void size_op(fx::Node* n);
  void getitem(fx::Node* n);
  void int_arith(fx::Node* n, const std::string& op);
  void reshape(fx::Node* n);
  // aten::unflatten as an ONNX Reshape; aten::unsqueeze and squeeze.dim as
  // Unsqueeze / Squeeze (opset 13: axes as an input).
  void unflatten(fx::Node* n);
  // A Reshape of n's first argument to `shape` (ONNX Reshape's: 0 copies, one -1).
  void reshape_to(fx::Node* n, const std::vector<int64_t>& shape);
  // flatten(start, end): ONNX Flatten when `end` is the last dim, else a Reshape
  // built from the input's dims (at most one of the output's dims dynamic).
  void flatten(fx::Node* n, int64_t start, int64_t end);
  void unsqueeze(fx::Node* n);
  void squeeze(fx::Node* n);
  void transpose(fx::Node* n);
  void expand(fx::Node* n);
  // AdaptiveAvgPool2d to `out` ([h, w] or [s]; -1: the input's size), from the
  // input's static dims. Defined in export_pool_ops.cpp.
  void adaptive_avg_pool(fx::Node* n, std::vector<int64_t> out);
  // Interpolation as ONNX Resize (export_resize_ops.cpp).
  void resize(fx::Node* n, bool linear, std::vector<int64_t> sizes, std::vector<double> scales, bool align_corners);
  void upsample_function(fx::Node* n);
  void adaptive_avg_pool1d(fx::Node* n, const std::vector<int64_t>& out);  // [N, C, L]: global, or windows of L / out
  void pad(fx::Node* n);   // F.pad / constant_pad_nd: ONNX Pad (constant, reflect, edge)
  void roll(fx::Node* n);  // torch.roll: Slice + Concat per dim
  // True for get_attr and aten ops reading only such nodes; fold_constant evaluates
  // one and stores it as an initializer. Defined in export_constants.cpp.
  bool constant_node(const fx::Node* n);
  void fold_constant(fx::Node* n);
  void evaluate_constants();  // every constant node's value, in one run (folded_)
  // The int list argument `i` of `n` (constants, a size() list, or computed ints).
  std::vector<Dim> size_list(const fx::Node& n, size_t i);
  void slice(fx::Node* n);
  // x[start:end:step] along `axis`: one ONNX Slice writing value `y`, node `name`.
  void slice_axis(const std::string& x, int64_t start, int64_t end, int64_t axis, int64_t step, const std::string& y, const std::string& name);
  // chunk(x, chunks, dim) as Slices (torch: pieces of ceil(D / chunks), the last smaller).
  void chunk(fx::Node* n);

  // Recurrent layers (export_rnn_ops.cpp): aten::lstm.input / gru.input as one ONNX LSTM /
  // GRU per layer (tuple_items_: output, h_n[, c_n]). The zeros
  // nn.LSTM makes for its initial state export as nothing (is_zeros: left out there).
  void rnn(fx::Node* n, bool lstm);
  bool is_zeros(const fx::Argument& a);
  void zeros(fx::Node* n);
  at::Tensor tensor_arg(const fx::Node& n, const fx::Argument& a);  // a constant or parameter, float
  std::vector<at::Tensor> tensors_arg(const fx::Node& n, const fx::Argument& a);  // a list of them
  const QuantDequant* rnn_weight_qd(const fx::Argument& a) const;  // a quantized weight's QuantDequant, or null
  bool read_by_rnn_only(const fx::Node* n);  // every use is a recurrent layer's (through its weight quantizers)
  std::string rnn_weight(fx::Node* n, const std::vector<fx::Argument>& items, const std::vector<at::Tensor>& w,
                         const std::vector<size_t>& at, const std::vector<int64_t>& order, const std::string& hint);
  std::string transposed(const std::string& x, const std::vector<int64_t>& perm, const std::string& hint);
  static void attr_s(onnx::NodeProto* p, const std::string& k, const std::string& v);

  // sum over dims as ReduceSum (export_gather_ops.cpp).
  void reduce_sum(fx::Node* n);

  // A call_function node: the op catalog's emission of its canonical op.
  void function(fx::Node* n) {
    const std::string op = canonical_op_name(*n, gm_);
    const OnnxExport& x = emission(*n, op, "op");
    if (!x.function) unsupported(*n, "op '" + op + "' is exported only as a module");
    x.function(*this, *n);
  }

  // True when both operands of a binary node are ints (size arithmetic).
  bool int_operands(const fx::Node& n) const { return n.args().size() >= 2 && is_int(n.args()[0]) && is_int(n.args()[1]); }

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
  bool folded_ready_ = false;
  int counter_ = 0;
  bool ms_imported_ = false;  // com.microsoft opset imported (int16 Q/DQ)
  fx::Node* first_input_ = nullptr;  // the first graph input (its dim 0: the dynamic batch)
  std::map<const fx::Node*, std::vector<Dim>> dims_;  // batch_shapes, computed on first need
  bool have_dims_ = false;
  std::map<const fx::Node*, Dim> ints_;                     // int values (sizes and arithmetic)
  std::map<const fx::Node*, std::vector<Dim>> int_lists_;  // size() lists
  std::map<const fx::Node*, std::vector<std::string>> tuple_items_;  // chunk pieces
};

}  // namespace qfx::quant::detail
