// QDQ matching: DequantizeLinear -> op -> QuantizeLinear groups become int8 ops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "kernels.h"
#include "qdq_match.h"
#include "qfx/error.h"

namespace qfx::runtime::ir {
namespace {

using qdq::Ctx;

// A QLut's "table" attribute: the 256 values `f` quantized with `yq`.
Attr quantized_table(const Tensor& f, const QInfo& yq) {
  if (f.numel() != 256) throw DataError("a table's function gives " + std::to_string(f.numel()) + " values, not 256");
  const int32_t qlo = yq.dtype == DType::kInt8 ? -128 : 0, qhi = yq.dtype == DType::kInt8 ? 127 : 255;
  Attr a;
  a.kind = Attr::Kind::kInts;
  for (int i = 0; i < 256; ++i) a.ints.push_back(quantize_value(f.data<float>()[i], yq.scale[0], yq.zero_point[0], qlo, qhi));
  return a;
}

// table[q - lowest code] = Q(f(DQ(q))) for the 256 codes of `xq`, f the float
// reference kernel of `n`: exactly what the unfused DQ -> op -> Q group computes.
Attr lut_table(const Node& n, const QInfo& xq, const QInfo& yq) {
  Node f = n;
  f.inputs.resize(1);
  Kernel k = make_kernel(f, {{{256}, DType::kFloat32}}, {nullptr}, "reference");
  const Tensor x = qdq::dequantized_codes(xq);
  Tensor y({256}, DType::kFloat32);
  k.run({&x}, {&y});
  return quantized_table(y, yq);
}

// table[q - lowest code] = Q(f(DQ(q))) for the region's function f, run node by node
// with the reference float kernels on the 256 dequantized codes.
Attr region_table(const Graph& g, const std::vector<size_t>& region, const std::string& v, const QInfo& xq, const QInfo& yq) {
  return quantized_table(qdq::region_values(g, region, v, qdq::dequantized_codes(xq)), yq);
}

bool same_q(const QInfo& a, const QInfo& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point && a.dtype == b.dtype;
}

}  // namespace

std::optional<QInfo> read_qparams(const Tensor& scale, const Tensor* zero_point, DType fallback, int64_t axis,
                                  std::string* why) {
  if (scale.dtype() != DType::kFloat32 || scale.numel() < 1) {
    *why = "scale is " + scale.describe() + ", expected float32 with at least one element";
    return std::nullopt;
  }
  QInfo q;
  q.scale.assign(scale.data<float>(), scale.data<float>() + scale.numel());
  q.dtype = fallback;
  q.axis = axis;
  if (!zero_point) {
    q.zero_point.assign(q.scale.size(), 0);
    return q;
  }
  const Tensor& z = *zero_point;
  if (z.dtype() != DType::kUInt8 && z.dtype() != DType::kInt8 && z.dtype() != DType::kInt16 && z.dtype() != DType::kInt32) {
    *why = std::string("zero_point is ") + dtype_name(z.dtype()) + ", expected uint8, int8, int16 or int32";
    return std::nullopt;
  }
  if (z.numel() != scale.numel()) {
    *why = std::to_string(z.numel()) + " zero points for " + std::to_string(scale.numel()) + " scales";
    return std::nullopt;
  }
  q.dtype = z.dtype();
  for (int64_t i = 0; i < z.numel(); ++i)
    q.zero_point.push_back(z.dtype() == DType::kUInt8   ? z.data<uint8_t>()[i]
                           : z.dtype() == DType::kInt8  ? z.data<int8_t>()[i]
                           : z.dtype() == DType::kInt16 ? z.data<int16_t>()[i]
                                                        : z.data<int32_t>()[i]);
  return q;
}

namespace {

// Moves each DequantizeLinear with per-tensor qparams below the data-movement ops that
// read it (Reshape, Transpose, Slice, Flatten, Squeeze, Unsqueeze), one copy per
// reader, so those ops move 8-bit codes and what follows them is fed by a
// DequantizeLinear again (ShuffleNet's channel shuffle and chunk, then a conv; a
// transformer's q/k/v slices). Moving values and dequantizing commute exactly.
void sink_dequantize(Graph& g) {
  static const std::set<std::string> moves = {"Reshape", "Transpose", "Slice", "Flatten", "Squeeze", "Unsqueeze"};
  std::set<std::string> outs;
  for (const auto& o : g.outputs) outs.insert(o.name);
  // Scale and zero point (when given) are one-element initializers.
  auto per_tensor = [&](const Node& dq) {
    if (dq.inputs.size() < 2) return false;
    for (size_t k = 1; k < dq.inputs.size() && k < 3; ++k) {
      if (dq.inputs[k].empty()) continue;
      auto it = g.initializers.find(dq.inputs[k]);
      if (it == g.initializers.end() || it->second.numel() != 1) return false;
    }
    return true;
  };
  // One pass: the copies a move leaves go after its readers, where the scan meets them.
  for (size_t i = 0; i < g.nodes.size();) {
    const Node dq = g.nodes[i];
    std::vector<size_t> readers;
    bool ok = dq.op == "DequantizeLinear" && dq.outputs.size() == 1 && !outs.count(dq.outputs[0]) && per_tensor(dq);
    for (size_t j = i + 1; j < g.nodes.size() && ok; ++j) {
      const Node& n = g.nodes[j];
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.inputs[k] != dq.outputs[0]) continue;
        ok = ok && k == 0 && moves.count(n.op) && n.outputs.size() == 1 && !outs.count(n.outputs[0]);
        if (ok && (readers.empty() || readers.back() != j)) readers.push_back(j);
      }
    }
    if (!ok || readers.empty()) {
      ++i;
      continue;
    }
    // Readers read the codes and write codes; a DequantizeLinear after each gives
    // back the float value under its old name.
    for (size_t r = readers.size(); r-- > 0;) {
      Node& n = g.nodes[readers[r]];
      const std::string y = n.outputs[0];
      n.inputs[0] = dq.inputs[0];
      n.outputs[0] = y + "_codes";
      Node d = dq;
      d.name = dq.name + "_after_" + n.name;
      d.inputs[0] = n.outputs[0];
      d.outputs = {y};
      g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(readers[r]) + 1, d);
    }
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));  // node i is now the next one
  }
  // Likewise a QuantizeLinear with per-tensor qparams moves above the data-movement op
  // that alone feeds it (x.mean([2, 3]) exported as GlobalAveragePool + Flatten: the
  // pool meets its QuantizeLinear and runs int8).
  for (bool changed = true; changed;) {
    changed = false;
    std::map<std::string, size_t> prod;
    std::map<std::string, int> reads;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const auto& in : g.nodes[i].inputs) ++reads[in];
      for (const auto& o : g.nodes[i].outputs) prod[o] = i;
    }
    for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
      const Node q = g.nodes[i];
      if (q.op != "QuantizeLinear" || q.outputs.size() != 1 || !per_tensor(q)) continue;
      auto pit = prod.find(q.inputs[0]);
      if (pit == prod.end() || reads[q.inputs[0]] != 1 || outs.count(q.inputs[0])) continue;
      Node& mv = g.nodes[pit->second];
      if (!moves.count(mv.op) || mv.outputs.size() != 1 || mv.inputs.empty()) continue;
      auto src = prod.find(mv.inputs[0]);
      if (src != prod.end() && g.nodes[src->second].op == "DequantizeLinear") continue;  // sunk already
      Node nq = q;
      nq.name = q.name + "_before_" + mv.name;
      nq.inputs[0] = mv.inputs[0];
      nq.outputs = {mv.inputs[0] + "_codes_" + q.name};
      mv.inputs[0] = nq.outputs[0];
      mv.outputs[0] = q.outputs[0];
      const size_t at = pit->second;
      g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
      g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(at), nq);
      changed = true;
    }
  }
  // A DequantizeLinear read only by a QuantizeLinear with the same qparams (what a
  // moved value meets next) is the identity on codes: both go.
  auto same_const = [&](const std::string& a, const std::string& b) {
    if (a == b) return true;
    auto x = g.initializers.find(a), y = g.initializers.find(b);
    return x != g.initializers.end() && y != g.initializers.end() && x->second.dtype() == y->second.dtype() &&
           x->second.nbytes() == y->second.nbytes() && std::memcmp(x->second.raw(), y->second.raw(), x->second.nbytes()) == 0;
  };
  std::map<std::string, int> uses;
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) ++uses[in];
    for (const auto& o : g.nodes[i].outputs) producer[o] = i;
  }
  std::map<std::string, std::string> rename;
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& q = g.nodes[i];
    if (q.op != "QuantizeLinear" || q.inputs.size() < 3 || outs.count(q.outputs[0])) continue;
    auto p = producer.find(q.inputs[0]);
    if (p == producer.end() || uses[q.inputs[0]] != 1) continue;
    const Node& d = g.nodes[p->second];
    if (d.op != "DequantizeLinear" || d.inputs.size() < 3 || !same_const(d.inputs[1], q.inputs[1]) || !same_const(d.inputs[2], q.inputs[2]))
      continue;
    rename[q.outputs[0]] = d.inputs[0];
    drop[i] = drop[p->second] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (drop[i]) continue;
    for (auto& in : g.nodes[i].inputs) {
      auto r = rename.find(in);
      while (r != rename.end()) {
        in = r->second;
        r = rename.find(in);
      }
    }
    kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

}  // namespace

std::vector<std::string> fuse_qdq(Graph& g) {
  sink_dequantize(g);
  Ctx c(g);
  std::vector<std::string> report;
  const std::vector<std::string> float_luts = lut_op_types();  // the ops with a table form (op schemas)
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (c.removed[i]) continue;
    const Node n = g.nodes[i];
    const std::string& op = n.op;
    auto d0 = n.inputs.empty() ? std::nullopt : c.dq(n.inputs[0]);
    if (!d0) continue;  // not fed by a dequantize: a float op
    const bool candidate = op == "Conv" || op == "Gemm" || op == "MatMul" || op == "Add" || op == "Mul" ||
                           op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "Concat" || op == "Relu" ||
                           op == "Clip" || op == "Flatten" || op == "Reshape" || op == "Squeeze" ||
                           op == "Unsqueeze" || op == "Transpose";
    std::string why;
    if (qdq::fuse_integer_only(c, i, *d0)) continue;
    // A target's tables are the ops its `arithmetic.lut` names. Under ONNX's arithmetic
    // every table op runs as one: the table equals the float group it replaces.
    const std::vector<std::string>& lut_ops = g.arithmetic.is_float() ? float_luts : g.arithmetic.lut;
    // A chain of elementwise float ops on one 8-bit value (SiLU as x * Sigmoid(x)):
    // one table, where the target has tables at all.
    if (!lut_ops.empty() && !d0->q.per_channel() && (d0->q.dtype == DType::kUInt8 || d0->q.dtype == DType::kInt8))
      if (auto reg = qdq::unary_region(g, c.removed, c.uses, c.graph_outputs, n.inputs[0], i)) {
        const Node& qn = g.nodes[reg->back()];
        auto yq = c.qparams(qn, DType::kUInt8);
        std::optional<Attr> table;
        if (yq && !yq->per_channel() && (yq->dtype == DType::kUInt8 || yq->dtype == DType::kInt8)) {
          try {
            table = region_table(g, *reg, n.inputs[0], d0->q, *yq);
          } catch (const Error&) {  // an op the reference cannot run on these shapes: stays float
          }
        }
        if (table) {
          Node f = n;
          f.op = "QLut";
          f.name = n.name + "_table";
          f.inputs = {d0->quantized};
          f.in_q = {d0->q};
          f.attrs.clear();
          f.attrs["table"] = *table;
          c.replace_region(i, f, *reg, *yq);
          continue;
        }
      }
    if (std::find(lut_ops.begin(), lut_ops.end(), op) != lut_ops.end() && !d0->q.per_channel() &&
        d0->q.dtype != DType::kInt32 && d0->q.dtype != DType::kInt16) {
      if (auto t = c.tail(i, false); t && t->q.dtype != DType::kInt16) {
        Node f = n;
        f.op = "QLut";
        f.inputs = {d0->quantized};
        f.in_q = {d0->q};
        f.out_q = t->q;
        f.attrs["table"] = lut_table(n, d0->q, t->q);
        c.replace(i, f, *t);
        continue;
      }
    }
    if (!candidate) {
      if (c.tail(i, false)) report.push_back(n.label() + ": no int8 kernel for this op; runs in float between DQ and Q");
      continue;
    }
    if (d0->q.per_channel() || d0->q.dtype == DType::kInt32) {
      report.push_back(n.label() + ": per-channel or int32 activation qparams; runs in float");
      continue;
    }
    if (op == "Conv" || op == "Gemm" || op == "MatMul") {
      auto dw = n.inputs.size() > 1 ? c.dq(n.inputs[1]) : std::nullopt;
      const Tensor* w = dw ? c.init(dw->quantized) : nullptr;
      // MatMul -> Add(constant bias) [-> Relu/Clip] -> Q: a linear on an input of rank
      // other than 2 (x @ W^T + b); the Add is absorbed as the bias.
      std::string add_bias;
      std::optional<size_t> add_node;
      if (op == "MatMul" && w && w->shape().size() == 2)
        if (auto a = c.only_consumer(n.outputs[0]); a && g.nodes[*a].op == "Add" && g.nodes[*a].inputs.size() == 2) {
          const Node& an = g.nodes[*a];
          const std::string& other = an.inputs[an.inputs[0] == n.outputs[0] ? 1 : 0];
          auto db = c.dq(other);
          const Tensor* bt = db ? c.init(db->quantized) : c.init(other);
          if (bt && bt->numel() == w->shape()[1] && (db ? bt->dtype() == DType::kInt32 : bt->dtype() == DType::kFloat32)) {
            add_bias = db ? db->quantized : other;
            add_node = a;
          }
        }
      auto t = add_node ? c.tail(*add_node, true) : c.tail(i, op != "MatMul");
      if (t && add_node) t->absorbed.push_back(*add_node);
      // MatMul between two quantized activations (attention scores and context):
      // per-tensor 8-bit qparams on both sides.
      if (op == "MatMul" && dw && !w && t && !dw->q.per_channel() && dw->q.dtype != DType::kInt32 &&
          dw->q.dtype != DType::kInt16 && d0->q.dtype != DType::kInt16 && t->q.dtype != DType::kInt16) {
        Node f = n;
        f.op = "QLinearMatMul";
        f.inputs = {d0->quantized, dw->quantized};
        f.in_q = {d0->q, dw->q};
        c.replace(i, f, *t);
        continue;
      }
      if (!dw || !w || !t) {
        if (t) report.push_back(n.label() + ": weights are not a dequantized constant; runs in float");
        continue;
      }
      if (dw->q.dtype != DType::kInt8 && dw->q.dtype != DType::kUInt8) {
        report.push_back(n.label() + ": weights are " + dtype_name(dw->q.dtype) + " (8-bit only); runs in float");
        continue;
      }
      if (op == "Gemm" && (n.attr_i("transA", 0) != 0 || n.attr_f("alpha", 1) != 1 || n.attr_f("beta", 1) != 1)) {
        report.push_back(n.label() + ": Gemm with transA/alpha/beta; runs in float");
        continue;
      }
      // Per-channel weights must be quantized along the output channel.
      const int64_t out_axis = op == "Conv" ? 0 : (op == "Gemm" && n.attr_i("transB", 0) != 0 ? 0 : 1);
      if (dw->q.per_channel() && (dw->q.axis < 0 ? dw->q.axis + static_cast<int64_t>(w->shape().size()) : dw->q.axis) != out_axis) {
        report.push_back(n.label() + ": per-channel weights on an axis other than the output channel; runs in float");
        continue;
      }
      std::string bias;
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
        auto db = c.dq(n.inputs[2]);
        if (db && c.init(db->quantized) && c.init(db->quantized)->dtype() == DType::kInt32) bias = db->quantized;
        else if (c.init(n.inputs[2])) bias = n.inputs[2];
        else {
          report.push_back(n.label() + ": bias is not constant; runs in float");
          continue;
        }
      }
      if (!add_bias.empty()) bias = add_bias;
      Node f = n;
      f.op = op == "Conv" ? "QLinearConv" : op == "Gemm" ? "QGemm" : "QLinearMatMul";
      f.inputs = {d0->quantized, dw->quantized};
      if (!bias.empty()) f.inputs.push_back(bias);
      f.in_q = {d0->q, dw->q};
      c.replace(i, f, *t);
      continue;
    }
    // int16 activations: the 16x8 conv / gemm above; other ops run in float
    // between DQ and Q (exact for max pooling and shape ops, ONNX's arithmetic for the rest).
    if (d0->q.dtype == DType::kInt16 || c.wide_tail(i)) {
      report.push_back(n.label() + ": int16 activations; no int16 kernel for this op, runs in float between DQ and Q");
      continue;
    }
    if (op == "Add" || op == "Mul") {
      auto d1 = n.inputs.size() > 1 ? c.dq(n.inputs[1]) : std::nullopt;
      auto t = c.tail(i, op == "Add");
      if (!d1 || !t || d1->q.per_channel() || d1->q.dtype == DType::kInt16) continue;
      Node f = n;
      f.op = op == "Add" ? "QLinearAdd" : "QLinearMul";
      f.inputs = {d0->quantized, d1->quantized};
      f.in_q = {d0->q, d1->q};
      c.replace(i, f, *t);
      continue;
    }
    if (op == "Concat") {
      std::vector<std::string> ins;
      std::vector<QInfo> qs;
      bool ok = true;
      for (const auto& in : n.inputs) {
        auto d = c.dq(in);
        if (!d || d->q.per_channel() || d->q.dtype == DType::kInt16) { ok = false; break; }
        ins.push_back(d->quantized);
        qs.push_back(d->q);
      }
      auto t = c.tail(i, false);
      if (!ok || !t) continue;
      Node f = n;
      f.op = "QLinearConcat";
      f.inputs = ins;
      f.in_q = qs;
      c.replace(i, f, *t);
      continue;
    }
    auto t = c.tail(i, false);
    if (!t) continue;
    Node f = n;
    f.inputs[0] = d0->quantized;
    f.in_q = {d0->q};
    if (op == "Relu" || op == "Clip") {
      f.op = op == "Relu" ? "QRelu" : "QClip";
      if (op == "Clip") {
        Ctx::Tail tt = *t;
        tt.act = "Clip";
        tt.lo = -3.4e38f;
        tt.hi = 3.4e38f;
        // A bound computed at run time (not a scalar float constant): stays float.
        if (!clip_bound(g, n, 1, &tt.lo) || !clip_bound(g, n, 2, &tt.hi)) continue;
        f.inputs.resize(1);
        c.replace(i, f, tt);
      } else {
        Ctx::Tail tt = *t;
        tt.act = "Relu";
        c.replace(i, f, tt);
      }
      continue;
    }
    if (op == "GlobalAveragePool" || op == "AveragePool") {
      f.op = "QLinear" + op;
      c.replace(i, f, *t);
      continue;
    }
    // MaxPool and shape ops move integers: only with identical qparams on both sides.
    if (!same_q(d0->q, t->q)) {
      report.push_back(n.label() + ": input and output qparams differ; runs in float");
      continue;
    }
    c.replace(i, f, *t);
  }
  // Drop what no one reads any more (dequantized weights, absorbed Q nodes).
  std::vector<Node> kept;
  bool changed = true;
  while (changed) {
    changed = false;
    std::map<std::string, int> uses;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (!c.removed[i])
        for (const auto& in : g.nodes[i].inputs) ++uses[in];
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (c.removed[i]) continue;
      bool used = false;
      for (const auto& o : g.nodes[i].outputs) used |= uses.count(o) || c.graph_outputs.count(o);
      if (!used) {
        c.removed[i] = true;
        changed = true;
      }
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!c.removed[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return report;
}

}  // namespace qfx::runtime::ir
