// The op catalog's recurrent layers: aten::lstm.input and aten::gru.input,
// what nn.LSTM and nn.GRU call (any number of layers, one or two directions, batch
// first or not), as one ONNX LSTM / GRU per layer (ONNX operator spec, opset 7-14
// semantics at layout 0: X [seq, batch, input], Y [seq, directions, batch, hidden]):
//   - weights reordered to ONNX's gate order: LSTM i, o, f, c from PyTorch's i, f, g, o;
//     GRU z, r, h from PyTorch's r, z, n, with linear_before_reset = 1 (PyTorch applies
//     the reset gate after the hidden projection);
//   - B = [b_ih, b_hh] per direction; initial states sliced per layer from h0 / c0, or
//     left out when they are zeros (nn.LSTM's default creates them with aten::zeros);
//   - Y transposed and reshaped to PyTorch's [seq, batch, directions * hidden] for the
//     next layer and the output; h_n / c_n the layers' Y_h / Y_c concatenated.
#include "export_rnn.h"
#include "export_shape.h"
#include "op_families.h"

namespace qfx::quant::detail {

namespace {

// `t` [gates * H, ...] with its gate blocks in `order`.
at::Tensor gates_in(const at::Tensor& t, const std::vector<int64_t>& order) {
  const auto blocks = t.chunk(static_cast<int64_t>(order.size()), 0);
  std::vector<at::Tensor> out;
  for (int64_t i : order) out.push_back(blocks[static_cast<size_t>(i)]);
  return at::cat(out, 0);
}

}  // namespace

bool is_zeros(Exporter& ex, const fx::Argument& a) {
  return a.is_node() && a.node->op() == fx::Opcode::kCallFunction &&
         (canonical_op_name(*a.node, ex.gm_) == "zeros" || canonical_op_name(*a.node, ex.gm_) == "zeros_like");
}

at::Tensor tensor_arg(Exporter& ex, const fx::Node& n, const fx::Argument& a) {
  if (a.is_const() && a.value.isTensor()) return a.value.toTensor().detach().to(at::kFloat);
  if (a.is_node() && a.node->op() == fx::Opcode::kGetAttr) return ex.gm_.get_attr(a.node->target()).detach().to(at::kFloat);
  if (a.is_node() && a.node->op() == fx::Opcode::kCallModule && !a.node->args().empty())
    return tensor_arg(ex, n, a.node->args()[0]);  // a weight FakeQuantize / QuantDequant: the parameter it reads
  unsupported(n, "a recurrent layer's weight that is not a parameter or a constant");
}

std::vector<at::Tensor> tensors_arg(Exporter& ex, const fx::Node& n, const fx::Argument& a) {
  std::vector<at::Tensor> out;
  if (a.is_const() && a.value.isTensorList()) {
    for (const at::Tensor& t : a.value.toTensorVector()) out.push_back(t.detach().to(at::kFloat));
  } else if (a.is_const() && a.value.isList()) {
    for (const c10::IValue& v : a.value.toListRef()) {
      if (!v.isTensor()) unsupported(n, "a recurrent layer's weight list holding a non-tensor");
      out.push_back(v.toTensor().detach().to(at::kFloat));
    }
  } else if (a.kind == fx::Argument::Kind::kList || a.kind == fx::Argument::Kind::kTuple) {
    for (const auto& item : a.items) out.push_back(tensor_arg(ex, n, item));
  } else {
    unsupported(n, "a recurrent layer's weights that are not a list of parameters or constants");
  }
  return out;
}

const QuantDequant* rnn_weight_qd(Exporter& ex, const fx::Argument& a) {
  if (ex.opt_.float_model || !a.is_node() || a.node->op() != fx::Opcode::kCallModule) return nullptr;
  return dynamic_cast<const QuantDequant*>(ex.gm_.get_submodule(a.node->target()).get());
}

bool read_by_rnn_only(Exporter& ex, const fx::Node* n) {
  // A parameter, or a quantizer of one: activations entering a recurrent layer are
  // quantized as everywhere else.
  const bool param = n->op() == fx::Opcode::kGetAttr ||
                     (n->op() == fx::Opcode::kCallModule && !n->args().empty() && n->args()[0].is_node() &&
                      n->args()[0].node->op() == fx::Opcode::kGetAttr);
  if (!param || n->users().empty()) return false;
  for (const fx::Node* u : n->users()) {
    if (u->op() == fx::Opcode::kCallFunction && is_recurrent_op(canonical_op_name(*u, ex.gm_))) continue;
    if (u->op() == fx::Opcode::kCallModule && read_by_rnn_only(ex, u)) continue;  // its weight FakeQuantize / QuantDequant
    return false;
  }
  return true;
}

// W or R of one layer, [dirs, gates * H, in], from the weights at `at` (one per
// direction) in ONNX's gate order: a float initializer, or, where the target quantizes
// them, per direction the integer codes DequantizeLinear'd along the rows (per-row
// scales reordered with the rows), unsqueezed and concatenated.
std::string rnn_weight(Exporter& ex, fx::Node* n, const std::vector<fx::Argument>& items, const std::vector<at::Tensor>& w,
                                 const std::vector<size_t>& at, const std::vector<int64_t>& order, const std::string& hint) {
  bool quantized = !items.empty();
  for (size_t i : at) quantized = quantized && i < items.size() && rnn_weight_qd(ex, items[i]);
  if (!quantized) {
    std::vector<at::Tensor> ws;
    for (size_t i : at) ws.push_back(gates_in(w[i], order));
    return ex.init(n->name() + hint, at::stack(ws));
  }
  std::vector<std::string> parts;
  for (size_t i : at) {
    const QParams& q = rnn_weight_qd(ex, items[i])->qparams();
    const int64_t rows = w[i].size(0);
    const at::Tensor scale = q.scale.to(at::kFloat).reshape({-1}).expand({rows}).contiguous();
    const at::Tensor zp = q.zero_point.to(at::kLong).reshape({-1}).expand({rows}).contiguous();
    const at::Tensor codes = at::clamp(at::round(w[i] / scale.unsqueeze(1)) + zp.unsqueeze(1), q.quant_min, q.quant_max);
    QParams rq = q;
    rq.zero_point = gates_in(zp, order);
    const at::ScalarType ct = q.dtype == QDType::kUInt8 ? at::kByte : at::kChar;
    const std::string c = ex.init(n->name() + hint + "_q", gates_in(codes, order).to(ct));
    const std::string sc = ex.init(n->name() + hint + "_scale", gates_in(scale, order));
    const std::string z = ex.init(n->name() + hint + "_zero_point", ex.zero_points(rq));
    const std::string dq = ex.fresh(n->name() + hint + "_dq"), one = ex.fresh(n->name() + hint + "_dir");
    ex.attr_i(ex.node("DequantizeLinear", {c, sc, z}, dq, dq), "axis", 0);
    ex.node("Unsqueeze", {dq, ex.ints_init("axes", {0})}, one, one);
    parts.push_back(one);
  }
  if (parts.size() == 1) return parts[0];
  const std::string v = ex.fresh(n->name() + hint);
  ex.attr_i(ex.node("Concat", parts, v, v), "axis", 0);
  return v;
}

// x with its axes permuted by `perm` (ONNX Transpose), a fresh value named after hint.
std::string transposed(Exporter& ex, const std::string& x, const std::vector<int64_t>& perm, const std::string& hint) {
  const std::string v = ex.fresh(hint);
  ex.attr_ints(ex.node("Transpose", {x}, v, v), "perm", perm);
  return v;
}

void rnn(Exporter& ex, fx::Node* n, bool lstm) {
  const std::string op = lstm ? "lstm" : "gru";
  if (n->args().size() < 9) unsupported(*n, "an " + op + " overload other than " + op + ".input");
  const bool has_b = ex.num_arg(*n, 3, 1) != 0, bidir = ex.num_arg(*n, 7, 0) != 0, batch_first = ex.num_arg(*n, 8, 0) != 0;
  const int64_t layers = static_cast<int64_t>(ex.num_arg(*n, 4, 1)), dirs = bidir ? 2 : 1, per = has_b ? 4 : 2;
  if (ex.num_arg(*n, 6, 0) != 0 && ex.num_arg(*n, 5, 0) != 0) unsupported(*n, "dropout between layers in training mode");
  const std::vector<at::Tensor> params = tensors_arg(ex, *n, n->args()[2]);
  const std::vector<fx::Argument> items = n->args()[2].kind == fx::Argument::Kind::kList ? n->args()[2].items : std::vector<fx::Argument>{};
  if (static_cast<int64_t>(params.size()) != layers * dirs * per)
    unsupported(*n, std::to_string(params.size()) + " weights for " + std::to_string(layers) + " layers");
  const std::vector<int64_t> order = lstm ? std::vector<int64_t>{0, 3, 1, 2} : std::vector<int64_t>{1, 0, 2};
  const int64_t H = params[1].size(1);
  // Initial states: h0 (and c0), [layers * dirs, batch, H]; zeros are left out.
  std::vector<const fx::Argument*> states;
  if (lstm) {
    for (const auto& s : n->args()[1].items) states.push_back(&s);
  } else {
    states.push_back(&n->args()[1]);
  }
  const std::string b = n->name();
  std::string x = ex.value(*n, n->args()[0]);
  if (batch_first) x = transposed(ex, x, {1, 0, 2}, b + "_seq_first");
  std::vector<std::string> y_h, y_c;
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<at::Tensor> B;
    std::vector<size_t> w_at, r_at;
    for (int64_t d = 0; d < dirs; ++d) {
      const size_t at = static_cast<size_t>((l * dirs + d) * per);
      w_at.push_back(at);
      r_at.push_back(at + 1);
      if (has_b) B.push_back(at::cat({gates_in(params[at + 2], order), gates_in(params[at + 3], order)}));
    }
    const std::string W = rnn_weight(ex, n, items, params, w_at, order, "_W"), R = rnn_weight(ex, n, items, params, r_at, order, "_R");
    std::vector<std::string> in = {x, W, R, has_b ? ex.init(b + "_B", at::stack(B)) : "", ""};
    for (const fx::Argument* s : states) {
      if (is_zeros(ex, *s)) {
        in.push_back("");
        continue;
      }
      const std::string piece = ex.fresh(b + "_state");
      slice_axis(ex, ex.value(*n, *s), l * dirs, (l + 1) * dirs, 0, 1, piece, piece);
      in.push_back(piece);
    }
    while (!in.empty() && in.back().empty()) in.pop_back();
    const std::string y = ex.fresh(b + "_Y");
    auto* p = ex.node(lstm ? "LSTM" : "GRU", in, y, ex.fresh(b + "_layer"));
    y_h.push_back(ex.fresh(b + "_Y_h"));
    p->add_output(y_h.back());
    if (lstm) {
      y_c.push_back(ex.fresh(b + "_Y_c"));
      p->add_output(y_c.back());
    }
    ex.attr_i(p, "hidden_size", H);
    if (bidir) ex.attr_s(p, "direction", "bidirectional");
    if (!lstm) ex.attr_i(p, "linear_before_reset", 1);
    // [seq, dirs, batch, H] -> [seq, batch, dirs * H]
    const std::string merged = ex.fresh(b + "_out");
    ex.node("Reshape", {transposed(ex, y, {0, 2, 1, 3}, b + "_batch_major"), ex.ints_init(b + "_out_shape", {0, 0, -1})}, merged, merged);
    x = merged;
  }
  if (batch_first) x = transposed(ex, x, {1, 0, 2}, b + "_batch_first");
  auto concat = [&](const std::vector<std::string>& parts, const std::string& hint) {
    if (parts.size() == 1) return parts[0];
    const std::string v = ex.fresh(b + hint);
    ex.attr_i(ex.node("Concat", parts, v, v), "axis", 0);
    return v;
  };
  ex.tuple_items_[n] = {x, concat(y_h, "_h_n")};
  if (lstm) ex.tuple_items_[n].push_back(concat(y_c, "_c_n"));
  ex.rank_[n] = 3;
}



void register_rnn_ops(OpCatalog& c) {
  const std::vector<std::string> rnn_onnx_ops = {"LSTM", "GRU", "Transpose", "Reshape", "Slice", "Concat", "DequantizeLinear", "Unsqueeze"};
  c.add(OpRecord("lstm").quantized_as(weighted_kinds()).as_recurrent().describe("nn.LSTM (aten::lstm.input) as one ONNX LSTM per layer")
            .writes(rnn_onnx_ops).to_onnx([](Exporter& e, fx::Node& n) { rnn(e, &n, true); }, nullptr, 7));
  c.add(OpRecord("gru").quantized_as(weighted_kinds()).as_recurrent().describe("nn.GRU (aten::gru.input) as one ONNX GRU per layer")
            .writes(rnn_onnx_ops).to_onnx([](Exporter& e, fx::Node& n) { rnn(e, &n, false); }, nullptr, 7));
}

}  // namespace qfx::quant::detail
