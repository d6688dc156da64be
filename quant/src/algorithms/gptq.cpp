// GPTQ (see ptq_algorithms.h): Frantar et al. 2022, Algorithm 1, with the paper's
// groups (block-wise qparams from the current weights) and the ordering by diag(H).
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "layers.h"
#include "qfx/error.h"
#include "qfx/quant/block_quant.h"
#include "qfx/quant/fake_quantize.h"

namespace qfx::quant {

GptqHessian::GptqHessian(int64_t k) {
  if (k < 1) throw ArgumentError("GptqHessian: the input needs at least one feature, got " + std::to_string(k));
  sum_ = at::zeros({k, k}, at::TensorOptions().dtype(at::kDouble));
}

void GptqHessian::add(const at::Tensor& x) {
  const int64_t k = sum_.size(0);
  if (x.dim() < 1 || x.size(-1) != k)
    throw DataError("GPTQ: a layer input has " + std::to_string(x.dim() < 1 ? 0 : x.size(-1)) + " features, expected " +
                    std::to_string(k));
  const at::Tensor rows = x.detach().reshape({-1, k}).to(at::kCPU, at::kDouble);
  sum_.addmm_(rows.t(), rows);
  rows_ += rows.size(0);
}

at::Tensor GptqHessian::hessian() const { return rows_ == 0 ? sum_.clone() : sum_ * (2.0 / static_cast<double>(rows_)); }

double gptq_relative_error(const at::Tensor& weight, const at::Tensor& quantized, const at::Tensor& hessian) {
  const at::Tensor w = weight.detach().to(at::kCPU, at::kDouble), h = hessian.to(at::kCPU, at::kDouble);
  const at::Tensor d = w - quantized.detach().to(at::kCPU, at::kDouble);
  const double num = (d.matmul(h) * d).sum().item<double>(), den = (w.matmul(h) * w).sum().item<double>();
  if (den > 0) return num / den;
  return num > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

namespace {

// The qparams of the sweep as [C, G] float64 tables: G = 1 (per tensor / per channel)
// or the blocks of a row (block-wise), `block` columns each.
struct Grid {
  at::Tensor scale, zp;
  double qmin = 0, qmax = 0;
  int64_t block = 0;  // 0: one group for the whole row
};

Grid grid_from(const QParams& q, int64_t c, int64_t k) {
  Grid g;
  g.qmin = static_cast<double>(q.quant_min);
  g.qmax = static_cast<double>(q.quant_max);
  g.block = q.block_size;
  const at::Tensor s = q.scale.detach().to(at::kCPU, at::kDouble).reshape({-1});
  const at::Tensor z = q.zero_point.detach().to(at::kCPU, at::kDouble).reshape({-1});
  const int64_t groups = q.block_size > 0 ? block_count(k, q.block_size) : 1;
  const int64_t want = q.block_size > 0 || q.per_channel ? c * groups : 1;
  if (s.numel() != want || z.numel() != want || (q.per_channel && q.block_size == 0 && q.axis != 0))
    throw ArgumentError("gptq: qparams (" + std::to_string(s.numel()) + " scales, axis " + std::to_string(q.axis) +
                        ") do not fit a [" + std::to_string(c) + ", " + std::to_string(k) + "] weight");
  g.scale = s.expand({want}).reshape({-1, groups}).expand({c, groups}).clone();
  g.zp = z.expand({want}).reshape({-1, groups}).expand({c, groups}).clone();
  return g;
}

// Round to nearest on the grid: writes the codes, returns (codes - zp) * scale.
at::Tensor quantize(const at::Tensor& w, const at::Tensor& scale, const at::Tensor& zp, const Grid& g, at::Tensor* codes) {
  *codes = at::clamp(at::round(w / scale) + zp, g.qmin, g.qmax);
  return (*codes - zp) * scale;
}

// [C, K] grid tables for every column (in the original order).
std::pair<at::Tensor, at::Tensor> grid_columns(const Grid& g, int64_t k) {
  const at::Tensor cols = at::arange(k, at::TensorOptions().dtype(at::kLong));
  const at::Tensor group = g.block > 0 ? at::div(cols, g.block, "floor") : at::zeros_like(cols);
  return {g.scale.index_select(1, group), g.zp.index_select(1, group)};
}

// Upper Cholesky factor of H^-1 (H symmetric positive definite after damping).
at::Tensor upper_cholesky_of_inverse(const at::Tensor& h) {
  const auto [l, info] = at::linalg_cholesky_ex(h);
  if (info.item<int64_t>() != 0)
    throw DataError("gptq: the damped Hessian is not positive definite (raise ptq.gptq.damp)");
  const auto [u, info_inv] = at::linalg_cholesky_ex(at::cholesky_inverse(l), /*upper=*/true);
  if (info_inv.item<int64_t>() != 0) throw DataError("gptq: the inverse Hessian is not positive definite (raise ptq.gptq.damp)");
  return u;
}

// One weight's sweep: the weight and U in sweep (permuted) column order.
struct Sweep {
  at::Tensor w, u;             // [C, K] float64 (error-updated up to the current lazy batch), [K, K]
  at::Tensor q, codes;         // [C, K] results, sweep order
  std::vector<int64_t> perm;   // sweep column -> original column
  Grid grid;
  QuantSpec spec;
  bool dynamic = false;        // block-wise qparams from the current weights
};

// The current weights of the block starting at sweep column j inside the lazy batch
// [i1, i2): in the batch from `w1`, beyond it `w` less the batch's pending errors.
at::Tensor current_block(const Sweep& s, int64_t j, const at::Tensor& w1, const at::Tensor& err, int64_t i1, int64_t i2) {
  const int64_t end = std::min(j + s.grid.block, s.w.size(1));
  const at::Tensor in = w1.slice(1, j - i1, std::min(end, i2) - i1);
  if (end <= i2) return in;
  const at::Tensor out = s.w.slice(1, i2, end) - err.matmul(s.u.slice(0, i1, i2).slice(1, i2, end));
  return at::cat({in, out}, 1);
}

// The paper's groups: the qparams of block `group` from its current weights' min/max.
void set_group(Sweep& s, int64_t group, const at::Tensor& cols) {
  const auto [mn, mx] = at::aminmax(cols, 1);
  QuantSpec spec = s.spec;
  spec.per_channel = true;
  spec.ch_axis = 0;
  const QParams q = compute_qparams(mn.to(at::kFloat), mx.to(at::kFloat), spec);
  s.grid.scale.select(1, group).copy_(q.scale.to(at::kDouble));
  s.grid.zp.select(1, group).copy_(q.zero_point.to(at::kDouble));
}

// Quantizes column i of the lazy batch and spreads its error over the batch's later columns.
void quantize_column(Sweep& s, at::Tensor& w1, at::Tensor& err, const at::Tensor& u1, int64_t i1, int64_t i) {
  const int64_t j = i1 + i;
  const int64_t g = s.grid.block > 0 ? s.perm[static_cast<size_t>(j)] / s.grid.block : 0;
  const at::Tensor w = w1.select(1, i).clone();
  at::Tensor codes;
  const at::Tensor q = quantize(w, s.grid.scale.select(1, g), s.grid.zp.select(1, g), s.grid, &codes);
  s.q.select(1, j).copy_(q);
  s.codes.select(1, j).copy_(codes);
  const at::Tensor e = (w - q) / u1[i][i].item<double>();
  w1.slice(1, i).sub_(e.unsqueeze(1) * u1.select(0, i).slice(0, i).unsqueeze(0));
  err.select(1, i).copy_(e);
}

// Algorithm 1's loop: lazy batches of columns, the batch's errors then applied to the rest.
void sweep(Sweep& s, int64_t lazy_batch) {
  const int64_t c = s.w.size(0), k = s.w.size(1);
  for (int64_t i1 = 0; i1 < k; i1 += lazy_batch) {
    const int64_t i2 = std::min(i1 + lazy_batch, k);
    at::Tensor w1 = s.w.slice(1, i1, i2).clone();
    at::Tensor err = at::zeros({c, i2 - i1}, w1.options());
    const at::Tensor u1 = s.u.slice(0, i1, i2).slice(1, i1, i2);
    for (int64_t i = 0; i < i2 - i1; ++i) {
      const int64_t j = i1 + i;
      if (s.dynamic && j % s.grid.block == 0) set_group(s, j / s.grid.block, current_block(s, j, w1, err, i1, i2));
      quantize_column(s, w1, err, u1, i1, i);
    }
    if (i2 < k) s.w.slice(1, i2).sub_(err.matmul(s.u.slice(0, i1, i2).slice(1, i2)));
  }
}

void check_options(const GptqOptions& o) {
  if (!(o.damp >= 0) || o.lazy_batch < 1 || o.num_samples < 1)
    throw ArgumentError("gptq: damp must be >= 0, lazy_batch and num_samples positive");
}

}  // namespace

GptqWeights gptq_quantize(const at::Tensor& weight, const at::Tensor& hessian, const QuantSpec& spec, const QParams& observed,
                          const GptqOptions& o) {
  check_options(o);
  if (weight.dim() != 2 || hessian.dim() != 2 || hessian.size(0) != weight.size(1) || hessian.size(1) != weight.size(1))
    throw ArgumentError("gptq: needs a [C, K] weight and a [K, K] Hessian");
  if (spec.block_size != observed.block_size) throw ArgumentError("gptq: the spec's block_size differs from the qparams'");
  const int64_t c = weight.size(0), k = weight.size(1);
  at::Tensor w = weight.detach().to(at::kCPU, at::kDouble).clone(), h = hessian.detach().to(at::kCPU, at::kDouble).clone();
  const at::Tensor dead = h.diagonal() == 0;
  h.diagonal().masked_fill_(dead, 1.0);
  w.masked_fill_(dead.unsqueeze(0), 0.0);
  Sweep s;
  s.grid = grid_from(observed, c, k);
  s.spec = spec;
  s.dynamic = spec.block_size > 0 && !o.act_order;
  const at::Tensor perm = o.act_order ? std::get<1>(at::sort(h.diagonal(), /*stable=*/true, 0, /*descending=*/true))
                                      : at::arange(k, at::TensorOptions().dtype(at::kLong));
  s.perm.assign(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + k);
  s.w = w.index_select(1, perm);
  h = h.index_select(0, perm).index_select(1, perm);
  h.diagonal().add_(o.damp * h.diagonal().mean().item<double>());
  s.u = upper_cholesky_of_inverse(h);
  s.q = at::zeros_like(s.w);
  s.codes = at::zeros_like(s.w);
  sweep(s, o.lazy_batch);
  const at::Tensor inverse = at::argsort(perm);
  GptqWeights r;
  r.weight = s.q.index_select(1, inverse);
  r.codes = s.codes.index_select(1, inverse).to(at::kLong);
  r.qparams = observed;
  r.qparams.scale = s.dynamic ? s.grid.scale.to(at::kFloat).reshape({-1}) : observed.scale.clone();
  r.qparams.zero_point = s.dynamic ? s.grid.zp.to(at::kInt).reshape({-1}) : observed.zero_point.clone();
  return r;
}

namespace {

// A layer GPTQ can run on: a weighted module, or a functional linear.
struct Target {
  std::string path;  // module path, or the aten::linear node's name
  fx::Node* node = nullptr;
  std::shared_ptr<FusedConvLinear> module;  // null: functional
  fx::Node* weight_attr = nullptr;          // functional: W's get_attr
  FakeQuantize* fq = nullptr;

  at::Tensor weight(fx::GraphModule& gm) const {
    return module ? module->weight().detach() : gm.get_attr(weight_attr->target()).detach();
  }
  // The new weight on a copy: the user's model keeps its float weight.
  void set_weight(fx::GraphModule& gm, const at::Tensor& w) const {
    if (!module) return detail::set_attr_copy(gm, weight_attr, w, "_gptq");
    module->unshare_parameters();
    module->weight().detach().copy_(w.to(module->weight().device(), module->weight().scalar_type()));
  }
};

// Why `gptq` leaves a layer as it is ("" when it runs on it).
std::string skip_reason(const Target& t, bool shared) {
  if (t.module && t.module->op() != FusedConvLinear::Op::kLinear) return "conv: GPTQ runs on Linear layers";
  if (shared) return "its weight is shared with another node";
  if (t.fq->learnable()) return "learnable (LSQ) weight scale";
  if (t.module && t.module->bn_simulated()) return "simulated batch norm";
  if (t.fq->qparams_frozen()) return "weight qparams already frozen";
  return "";
}

// The weighted modules (first call) and functional linears of the graph, in graph order.
std::vector<std::pair<Target, bool>> targets(fx::GraphModule& gm) {
  std::vector<std::pair<Target, bool>> out;  // (layer, shared weight)
  std::set<std::string> seen;
  for (fx::Node* n : gm.graph().nodes()) {
    if (n->op() == fx::Opcode::kCallModule) {
      auto f = std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(n->target()));
      if (f && f->weight_fake_quant() && seen.insert(n->target()).second)
        out.push_back({{n->target(), n, f, nullptr, f->weight_fake_quant()}, false});
    } else if (const auto fl = detail::functional_linear(gm, n)) {
      out.push_back({{n->name(), n, nullptr, fl->weight_attr, fl->fq}, fl->shared});
    }
  }
  return out;
}

// Freezes `fq` at the qparams `q` (same layout as its own).
void freeze_at(FakeQuantize& fq, const QParams& q) {
  fq.freeze_qparams();
  auto buffers = fq.named_buffers(/*recurse=*/false);
  at::Tensor* s = buffers.find("scale");
  at::Tensor* z = buffers.find("zero_point");
  if (!s || !z || s->numel() != q.scale.numel() || z->numel() != q.zero_point.numel())
    throw InternalError("gptq: the weight FakeQuantize's qparams do not have GPTQ's layout");
  s->copy_(q.scale.reshape(s->sizes()));
  z->copy_(q.zero_point.reshape(z->sizes()).to(z->scalar_type()));
}

GptqLayerReport gptq_layer(fx::GraphModule& gm, const Target& l, const std::vector<std::vector<at::Tensor>>& samples,
                           const GptqOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  FakeQuantize& fq = *l.fq;
  const at::Tensor w = l.weight(gm);
  GptqHessian acc(w.size(1));
  const auto add = [&acc](const at::Tensor& x) { acc.add(x); };
  if (l.module) detail::for_each_input(gm, l.path, samples, add);
  else detail::for_each_input_of(gm, l.node, samples, add);
  const at::Tensor h = acc.hessian();
  const QParams observed = fq.qparams();
  const GptqWeights g = gptq_quantize(w, h, fq.observer().spec(), observed, o);

  const Grid grid = grid_from(observed, w.size(0), w.size(1));
  const auto [scale, zp] = grid_columns(grid, w.size(1));
  at::Tensor codes;
  const at::Tensor w64 = w.to(at::kCPU, at::kDouble);
  const at::Tensor nearest = quantize(w64, scale, zp, grid, &codes);
  GptqLayerReport r;
  r.layer = l.path;
  r.error_nearest = gptq_relative_error(w64, nearest, h);
  r.error_gptq = gptq_relative_error(w64, g.weight, h);
  r.rows = acc.rows();
  r.dead_inputs = (h.diagonal() == 0).sum().item<int64_t>();

  at::NoGradGuard ng;
  freeze_at(fq, g.qparams);
  l.set_weight(gm, g.weight.to(w.scalar_type()));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Observes the weight now when its FakeQuantize has no statistics and no frozen
// qparams (a model calibrated on the runtime), so that its qparams are the weight's.
void observe_weight_if_uncalibrated(fx::GraphModule& gm, const Target& t) {
  if (t.module) return detail::observe_weight_if_uncalibrated(*t.fq, *t.module);
  if (t.fq->observer().has_data() || t.fq->qparams_frozen()) return;
  at::NoGradGuard ng;
  t.fq->enable_observer(true);
  t.fq->forward(t.weight(gm));
  t.fq->disable_observer();
}

}  // namespace

GptqResult gptq(fx::GraphModule& gm, const NextBatch& data, const GptqOptions& o) {
  check_options(o);
  const auto samples = detail::take_samples(data, o.num_samples);
  if (samples.empty()) throw ArgumentError("gptq: no calibration data");
  GptqResult out;
  std::vector<Target> todo;
  for (const auto& [l, shared] : targets(gm)) {
    // Every weight observed first: the captures run the layers after the current one too.
    observe_weight_if_uncalibrated(gm, l);
    const std::string why = skip_reason(l, shared);
    if (why.empty()) todo.push_back(l);
    else out.skipped.emplace_back(l.path, why);
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  int64_t done = 0;
  for (const auto& l : todo) {
    out.layers.push_back(gptq_layer(gm, l, samples, o));
    if (o.progress) o.progress(l.path, ++done, static_cast<int64_t>(todo.size()));
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return out;
}

}  // namespace qfx::quant
