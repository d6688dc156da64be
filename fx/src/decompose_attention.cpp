// aten::scaled_dot_product_attention as matmul / softmax / matmul (see
// decompositions.h for the formula and its source).
#include "qfx/fx/decompositions.h"

#include <ATen/ops/full.h>
#include <ATen/ops/triu.h>

#include <cmath>
#include <limits>
#include <optional>

#include "qfx/error.h"

namespace qfx::fx {
namespace {

// aten::scaled_dot_product_attention(query, key, value, attn_mask=None,
// dropout_p=0., is_causal=False, *, scale=None, enable_gqa=False): the argument
// at `i` (positional) or named `name` (keyword), or nullptr.
const Argument* sdpa_arg(const Node& n, size_t i, const char* name) {
  if (i < n.args().size()) return &n.args()[i];
  for (const auto& kv : n.kwargs())
    if (kv.first == name) return &kv.second;
  return nullptr;
}

bool is_none(const Argument* a) { return !a || (a->is_const() && a->value.isNone()); }

double number(const Node& n, const Argument* a, const char* what, double def) {
  if (is_none(a)) return def;
  if (!a->is_const() || !(a->value.isDouble() || a->value.isInt() || a->value.isBool()))
    throw UnsupportedOpError("node " + n.name() + ": scaled_dot_product_attention's " + what +
                             " must be a constant to decompose it");
  const auto& v = a->value;
  return v.isDouble() ? v.toDouble() : v.isInt() ? static_cast<double>(v.toInt()) : (v.toBool() ? 1.0 : 0.0);
}

// The static size of dimension `d` (negative: from the end) of a node's tensor value,
// from the tracer's meta["traced_shape"] or ShapeProp's meta["shape"].
std::optional<int64_t> static_dim(const Argument& a, int64_t d) {
  if (!a.is_node()) return std::nullopt;
  for (const char* key : {"shape", "traced_shape"}) {
    auto it = a.node->meta().find(key);
    if (it == a.node->meta().end() || !it->second.isIntList()) continue;
    const auto s = it->second.toIntVector();
    const int64_t i = d < 0 ? d + static_cast<int64_t>(s.size()) : d;
    if (i < 0 || i >= static_cast<int64_t>(s.size()) || s[static_cast<size_t>(i)] < 0) continue;
    return s[static_cast<size_t>(i)];
  }
  return std::nullopt;
}

class AttentionRewrite {
 public:
  AttentionRewrite(GraphModule& gm, Node* n) : gm_(gm), g_(gm.graph()), n_(n) {}

  void run() {
    const Argument& q = n_->args().at(0);
    const Argument& k = n_->args().at(1);
    const Argument& v = n_->args().at(2);
    const Argument* mask = sdpa_arg(*n_, 3, "attn_mask");
    const double dropout = number(*n_, sdpa_arg(*n_, 4, "dropout_p"), "dropout_p", 0.0);
    const bool causal = number(*n_, sdpa_arg(*n_, 5, "is_causal"), "is_causal", 0.0) != 0.0;
    const double scale = number(*n_, sdpa_arg(*n_, 6, "scale"), "scale", 0.0);
    const bool gqa = number(*n_, sdpa_arg(*n_, 7, "enable_gqa"), "enable_gqa", 0.0) != 0.0;
    if (gqa) check_equal_heads(q, k);

    auto guard = g_.inserting_before(n_);
    Node* kt = emit("aten::transpose.int", {k, Argument(c10::IValue(int64_t{-2})), Argument(c10::IValue(int64_t{-1}))}, "key_t");
    Node* s = emit("aten::matmul", {q, Argument(kt)}, "scores");
    s = emit("aten::mul.Scalar", {Argument(s), Argument(c10::IValue(scale > 0 ? scale : default_scale(q)))}, "scaled");
    if (!is_none(mask)) s = apply_mask(s, *mask);
    if (causal) s = emit("aten::add.Tensor", {Argument(s), Argument(causal_mask(q, k)), Argument(c10::IValue(int64_t{1}))}, "causal");
    Node* p = emit("aten::softmax.int", {Argument(s), Argument(c10::IValue(int64_t{-1})), Argument()}, "weights");
    if (dropout > 0)
      p = emit("aten::dropout", {Argument(p), Argument(c10::IValue(dropout)), Argument(c10::IValue(true))}, "dropout");
    Node* out = emit("aten::matmul", {Argument(p), v}, "out");
    for (const char* key : {"traced_shape", "shape", "is_tensor", "type"}) {
      auto it = n_->meta().find(key);
      if (it != n_->meta().end()) out->meta()[key] = it->second;
    }
    n_->replace_all_uses_with(out);
    g_.erase_node(n_);
  }

 private:
  Node* emit(const std::string& target, std::vector<Argument> args, const std::string& suffix) {
    Node* x = g_.call_function(target, std::move(args), {}, n_->name() + "_" + suffix);
    for (const char* key : {"module_path", "source"}) {
      auto it = n_->meta().find(key);
      if (it != n_->meta().end()) x->meta()[key] = it->second;
    }
    x->meta()["is_tensor"] = true;
    return x;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw UnsupportedOpError("node " + n_->name() + " (aten::scaled_dot_product_attention): " + what);
  }

  double default_scale(const Argument& q) const {
    const auto e = static_dim(q, -1);
    if (!e || *e <= 0)
      fail("the default scale 1/sqrt(E) needs the query's last dimension E, which is not static here; "
           "give the input shape (model.input_shape, --input-shape, TracerOptions::input_shapes) or pass scale=");
    return 1.0 / std::sqrt(static_cast<double>(*e));
  }

  void check_equal_heads(const Argument& q, const Argument& k) const {
    const auto hq = static_dim(q, -3), hk = static_dim(k, -3);
    if (!hq || !hk || *hq != *hk) fail("grouped-query attention (enable_gqa with fewer key heads) is not decomposed");
  }

  // The mask's scalar type: ShapeProp's meta["dtype"], the tracer's
  // meta["traced_dtype"], or the tensor a get_attr reads; "" when unknown.
  std::string dtype_of(const Argument& a) const {
    if (!a.is_node()) return "";
    for (const char* key : {"dtype", "traced_dtype"}) {
      auto it = a.node->meta().find(key);
      if (it != a.node->meta().end() && it->second.isString()) return it->second.toStringRef();
    }
    if (a.node->op() == Opcode::kGetAttr && gm_.has_attr(a.node->target()))
      return c10::toString(gm_.get_attr(a.node->target()).scalar_type());
    return "";
  }

  Node* apply_mask(Node* s, const Argument& mask) {
    // A bool mask marks the positions that take part; a float mask is added.
    const std::string dt = dtype_of(mask);
    if (dt.empty()) fail("attn_mask's dtype is not known here (bool and float masks differ); give the input shape");
    if (dt == "Bool") {
      Node* off = emit("aten::logical_not", {mask}, "mask_off");
      return emit("aten::masked_fill.Scalar",
                  {Argument(s), Argument(off), Argument(c10::IValue(-std::numeric_limits<double>::infinity()))}, "masked");
    }
    return emit("aten::add.Tensor", {Argument(s), mask, Argument(c10::IValue(int64_t{1}))}, "masked");
  }

  Node* causal_mask(const Argument& q, const Argument& k) {
    const auto l = static_dim(q, -2), s = static_dim(k, -2);
    if (!l || !s) fail("is_causal needs static query and key lengths (L, S); give the input shape");
    const at::Tensor m = at::triu(at::full({*l, *s}, -std::numeric_limits<float>::infinity()), 1);
    const std::string path = n_->name() + "_causal_mask";
    gm_.add_tensor(path, m, /*is_buffer=*/true);
    return g_.get_attr(path, path);
  }

  GraphModule& gm_;
  Graph& g_;
  Node* n_;
};

}  // namespace

int decompose_attention(GraphModule& gm) {
  int count = 0;
  for (Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::kCallFunction) continue;
    const std::string& t = n->target();
    if (t != "aten::scaled_dot_product_attention" && t.rfind("aten::scaled_dot_product_attention.", 0) != 0) continue;
    AttentionRewrite(gm, n).run();
    ++count;
  }
  return count;
}

}  // namespace qfx::fx
