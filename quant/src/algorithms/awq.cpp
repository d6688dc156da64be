// AWQ's scale search (see ptq_algorithms.h): Lin et al. 2024, section 3.2.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "layers.h"
#include "norm_scale.h"
#include "qfx/error.h"
#include "qfx/quant/block_quant.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/observer.h"

namespace qfx::quant {
namespace {

// A Linear module, or a functional linear (aten::linear) whose weight is a get_attr
// read only through its weight FakeQuantize.
struct Linear {
  std::string path;  // module path, or the aten::linear node's name
  fx::Node* node = nullptr;
  std::shared_ptr<FusedConvLinear> module;  // null: functional
  fx::Node* weight_attr = nullptr;          // functional: the get_attr
  QuantSpec spec;                           // the weight's

  at::Tensor weight(fx::GraphModule& gm) const {
    return module ? module->weight().detach() : gm.get_attr(weight_attr->target()).detach();
  }
  // A new weight, on a copy: the user's model keeps its parameters.
  void set_weight(fx::GraphModule& gm, const at::Tensor& w) const {
    if (module) {
      module->unshare_parameters();
      module->weight().detach().copy_(w);
      return;
    }
    detail::set_attr_copy(gm, weight_attr, w, "_awq");
  }
  // W diag(s).
  void scale_columns(fx::GraphModule& gm, const at::Tensor& s) const { set_weight(gm, weight(gm) * s.reshape({1, -1})); }
};

// Linears reading one value `x`, directly or through their activation FakeQuantize.
struct Group {
  fx::Node* x = nullptr;
  bool quantized_input = false;
  std::vector<Linear> linears;
};

// Round to nearest on the weight's grid: min/max qparams per tensor, row or block.
at::Tensor nearest(const at::Tensor& w, const QuantSpec& spec) {
  const at::Tensor rows = spec.block_size > 0 ? to_blocks(w, spec.block_size)
                                              : w.reshape({spec.per_channel ? w.size(0) : 1, -1});
  const auto [mn, mx] = at::aminmax(rows, 1);
  QuantSpec per_row = spec;
  per_row.per_channel = true;
  per_row.ch_axis = 0;
  per_row.block_size = 0;
  const QParams q = compute_qparams(mn, mx, per_row);
  const at::Tensor scale = q.scale.to(at::kFloat).reshape({-1, 1}), zp = q.zero_point.to(at::kFloat).reshape({-1, 1});
  const at::Tensor out = (at::clamp(at::round(rows / scale) + zp, static_cast<double>(q.quant_min),
                                    static_cast<double>(q.quant_max)) - zp) * scale;
  return spec.block_size > 0 ? from_blocks(out, w.size(0), w.size(1)) : out.reshape(w.sizes());
}

// `n` as a quantized Linear module or functional linear (false: neither); `why` set when it cannot take part.
bool as_linear(fx::GraphModule& gm, fx::Node* n, const std::map<std::string, int>& calls, Linear* out, const char** why) {
  if (n->op() != fx::Opcode::kCallModule) {
    const auto fl = detail::functional_linear(gm, n);
    if (!fl) return false;
    if (fl->shared) *why = "its weight is shared with another node";
    *out = {n->name(), n, nullptr, fl->weight_attr, fl->fq->observer().spec()};
    return true;
  }
  auto f = std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(n->target()));
  if (!f || f->op() != FusedConvLinear::Op::kLinear || !f->weight_fake_quant()) return false;
  if (f->bn_simulated()) *why = "batch norm folded into it";
  else if (calls.at(n->target()) > 1) *why = "called more than once";
  *out = {n->target(), n, f, nullptr, f->weight_fake_quant()->observer().spec()};
  return true;
}

// The groups of the prepared graph's quantized linears, in graph order.
std::vector<Group> find_groups(fx::GraphModule& gm, AwqResult* result) {
  std::vector<Group> groups;
  std::map<fx::Node*, size_t> index;
  std::map<std::string, int> calls;
  for (fx::Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::kCallModule) ++calls[n->target()];
  for (fx::Node* n : gm.graph().nodes()) {
    Linear l;
    const char* why = nullptr;
    if (!as_linear(gm, n, calls, &l, &why)) continue;
    if (!why && (n->args().empty() || !n->args()[0].is_node())) why = "its input is not a graph value";
    if (why) {
      result->skipped.emplace_back(l.path, why);
      continue;
    }
    fx::Node* x = n->args()[0].node;
    bool quantized = false;
    if (x->op() == fx::Opcode::kCallModule && dynamic_cast<FakeQuantize*>(gm.get_submodule(x->target()).get())) {
      if (x->args().empty() || !x->args()[0].is_node()) continue;
      x = x->args()[0].node;
      quantized = true;
    }
    auto [it, fresh] = index.emplace(x, groups.size());
    if (fresh) groups.push_back({x, false, {}});
    groups[it->second].quantized_input |= quantized;
    groups[it->second].linears.push_back(l);
  }
  return groups;
}

// The group's input over `samples` in the float model.
at::Tensor capture(fx::GraphModule& gm, const Group& g, const std::vector<std::vector<at::Tensor>>& samples) {
  set_quant_state(gm, QuantState::kFloat);
  std::vector<at::Tensor> got;
  detail::for_each_input_of(gm, g.linears.front().node, samples, [&got](const at::Tensor& x) { got.push_back(x); });
  return at::cat(got, 0);
}

// The normalised scales for ratio r: mean|x|^r / sqrt(max * min).
at::Tensor scales_for(const at::Tensor& mean_abs, double r) {
  at::Tensor s = at::pow(mean_abs.clamp_min(1e-4), r);
  return s / at::sqrt(s.max() * s.min());
}

// sum over the linears of mean((x (W' - W)^T)^2), W' = Q(W diag(s)) diag(s)^-1.
double output_error(fx::GraphModule& gm, const Group& g, const at::Tensor& x, const at::Tensor& s) {
  double err = 0;
  for (const Linear& l : g.linears) {
    const at::Tensor w = l.weight(gm);
    const at::Tensor d = nearest(w * s.reshape({1, -1}), l.spec) / s.reshape({1, -1}) - w;
    err += x.matmul(d.t()).pow(2).mean().item<double>();
  }
  return err;
}

// The group's only readers are its linears (directly or through FakeQuantize nodes that only they read).
bool read_only_by_group(const Group& g) {
  std::vector<fx::Node*> mine;
  for (const Linear& l : g.linears) mine.push_back(l.node);
  const auto is_mine = [&](fx::Node* u) { return std::find(mine.begin(), mine.end(), u) != mine.end(); };
  for (fx::Node* u : g.x->users()) {
    if (is_mine(u)) continue;
    for (fx::Node* v : u->users())
      if (!is_mine(v)) return false;
    if (u->op() != fx::Opcode::kCallModule || u->users().empty()) return false;
  }
  return true;
}

// Gives the group's input 1/s: folded into a LayerNorm, or an aten::mul before the linears.
std::string apply(fx::GraphModule& gm, const Group& g, const at::Tensor& s) {
  auto norm = detail::as_norm(gm, g.x);
  const bool fold = norm && read_only_by_group(g);
  if (fold) {
    detail::scale_norm(gm, *norm, s, "_awq");
  } else if (!g.quantized_input) {
    const std::string attr = gm.graph().unique_name(g.x->name() + "_awq_inverse_scale");
    gm.add_tensor(attr, (1.0 / s).contiguous(), /*is_buffer=*/false);
    auto guard = gm.graph().inserting_before(g.linears.front().node);
    fx::Node* c = gm.graph().get_attr(attr);
    fx::Node* m = gm.graph().call_function("aten::mul.Tensor", {fx::Argument(g.x), fx::Argument(c)}, {},
                                           g.x->name() + "_awq");
    m->meta() = g.x->meta();
    for (const Linear& l : g.linears) l.node->replace_input_with(g.x, m);
  } else {
    return "";
  }
  for (const Linear& l : g.linears) l.scale_columns(gm, s);
  return fold ? "layer_norm" : "mul";
}

// The column ranges the clipping search treats on their own: the weight's blocks, or
// whole rows for per-channel weights; none for per-tensor weights.
std::vector<std::pair<int64_t, int64_t>> clip_blocks(const QuantSpec& spec, int64_t columns) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (spec.block_size > 0)
    for (int64_t c = 0; c < columns; c += spec.block_size) out.emplace_back(c, std::min(columns, c + spec.block_size));
  else if (spec.per_channel)
    out.emplace_back(0, columns);
  return out;
}

// The clipping search of one linear on its (scaled) input x [T, K]: per output row
// and block, max|w| shrunk to the ratio whose nearest rounding gives the least
// output error; the weight clamped to it. Returns the linear's output error after.
double clip_weight(fx::GraphModule& gm, const Linear& l, const at::Tensor& x, const AwqOptions& o) {
  const at::Tensor w = l.weight(gm).to(at::kFloat);
  QuantSpec rows = l.spec;  // each [rows, block] slice quantized per row: one block per row
  rows.per_channel = true;
  rows.ch_axis = 0;
  rows.block_size = 0;
  const auto blocks = clip_blocks(l.spec, w.size(1));
  at::Tensor clipped = w.clone();
  const int64_t steps = static_cast<int64_t>(std::floor(o.max_shrink * static_cast<double>(o.grid) + 1e-9));
  for (const auto& [c0, c1] : blocks) {
    const at::Tensor wb = w.slice(1, c0, c1), xb = x.slice(1, c0, c1);
    const at::Tensor ref = xb.matmul(wb.t());
    const at::Tensor amax = wb.abs().amax(1, true);
    at::Tensor best_err = at::full({w.size(0)}, std::numeric_limits<float>::infinity()), best_max = amax.clone();
    for (int64_t i = 0; i <= steps; ++i) {
      const at::Tensor m = amax * (1.0 - static_cast<double>(i) / static_cast<double>(o.grid));
      const at::Tensor err = (xb.matmul(nearest(at::clamp(wb, -m, m), rows).t()) - ref).pow(2).mean(0);
      const at::Tensor better = err < best_err;
      best_err = at::where(better, err, best_err);
      best_max = at::where(better.reshape({-1, 1}), m, best_max);
    }
    clipped.slice(1, c0, c1).copy_(at::clamp(wb, -best_max, best_max));
  }
  if (!blocks.empty()) l.set_weight(gm, clipped.to(l.weight(gm).scalar_type()));
  return x.matmul((nearest(clipped, l.spec) - w).t()).pow(2).mean().item<double>();
}

// At most `n` rows of x, evenly spaced.
at::Tensor some_rows(const at::Tensor& x, int64_t n) {
  if (x.size(0) <= n) return x;
  return x.index_select(0, at::linspace(0, static_cast<double>(x.size(0) - 1), n).round().to(at::kLong));
}

}  // namespace

AwqResult awq(fx::GraphModule& gm, const NextBatch& data, const AwqOptions& o) {
  if (o.grid < 1) throw ArgumentError("awq: grid must be at least 1, got " + std::to_string(o.grid));
  if (!(o.max_shrink >= 0 && o.max_shrink <= 1))
    throw ArgumentError("awq: max_shrink must be in [0, 1], got " + std::to_string(o.max_shrink));
  if (o.clip_tokens < 1) throw ArgumentError("awq: clip_tokens must be at least 1, got " + std::to_string(o.clip_tokens));
  const auto samples = detail::take_samples(data, o.num_samples);
  if (samples.empty()) throw ArgumentError("awq: no calibration data");
  AwqResult result;
  std::vector<Group> groups = find_groups(gm, &result);
  at::NoGradGuard ng;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    const at::Tensor x = capture(gm, g, samples);
    const at::Tensor rows = x.reshape({-1, x.size(-1)}).to(at::kFloat);
    const at::Tensor mean_abs = rows.abs().mean(0);
    AwqGroup rep;
    rep.input = g.x->name();
    for (const Linear& l : g.linears) rep.linears.push_back(l.path);
    rep.error_nearest = rep.error_awq = output_error(gm, g, rows, at::ones_like(mean_abs));
    for (int64_t i = 1; i < o.grid; ++i) {
      const double r = static_cast<double>(i) / static_cast<double>(o.grid);
      const double e = output_error(gm, g, rows, scales_for(mean_abs, r));
      if (e < rep.error_awq) rep.error_awq = e, rep.ratio = r;
    }
    const at::Tensor s = scales_for(mean_abs, rep.ratio);
    if (rep.ratio > 0) rep.applied = apply(gm, g, s);
    const bool unscaled = rep.ratio > 0 && rep.applied.empty();
    if (unscaled) {
      for (const Linear& l : g.linears)
        result.skipped.emplace_back(l.path, "not scaled: its input " + rep.input +
                                                " is quantized and not a LayerNorm only these linears read" +
                                                (o.clip ? " (its weights are clipped)" : ""));
      rep.ratio = 0;  // the linears keep their weights: the clipping search still runs
      rep.error_awq = rep.error_nearest;
    }
    rep.error_clip = rep.error_awq;
    if (o.clip) {
      const at::Tensor x = some_rows(rows, o.clip_tokens);
      const at::Tensor xs = rep.applied.empty() ? x : x / s.reshape({1, -1});  // the input the (scaled) weights see
      rep.error_clip = 0;
      for (const Linear& l : g.linears) rep.error_clip += clip_weight(gm, l, xs, o);
    }
    if (!unscaled || o.clip) result.groups.push_back(rep);
    if (o.progress) o.progress(rep.input, static_cast<int64_t>(gi) + 1, static_cast<int64_t>(groups.size()));
  }
  set_quant_state(gm, QuantState::kCalibration);
  return result;
}

}  // namespace qfx::quant
