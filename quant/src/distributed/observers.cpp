// all_reduce_observers, broadcast_parameters and GradientReducer (see distributed.h).
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "qfx/error.h"
#include "qfx/fx/graph_module.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/observer.h"

namespace qfx::quant::distributed {
namespace {

// A handle on a buffer (sharing its storage: copy_ writes the module's buffer). By
// value: named_buffers() returns a temporary dictionary.
at::Tensor buffer(torch::nn::Module& m, const std::string& name) {
  const auto all = m.named_buffers(/*recurse=*/false);
  const at::Tensor* t = all.find(name);
  if (!t) throw InternalError("observer " + m.name() + " has no buffer '" + name + "'");
  return *t;
}

// Every rank's histogram merged into each, in rank order, so all ranks end equal.
void merge_histograms(HistogramObserver& h, Context& ctx) {
  const int64_t bins = h.bins();
  at::Tensor mine = at::cat({buffer(h, "histogram"), buffer(h, "range"), buffer(h, "min_val").to(at::kDouble).reshape({1}),
                             buffer(h, "max_val").to(at::kDouble).reshape({1})});
  const at::Tensor all = ctx.all_gather(mine, "all_reduce_observers (histogram of '" + h.tensor_name() + "')");
  auto load = [bins](HistogramObserver& dst, const at::Tensor& row) {
    buffer(dst, "histogram").copy_(row.slice(0, 0, bins));
    buffer(dst, "range").copy_(row.slice(0, bins, bins + 2));
    buffer(dst, "min_val").fill_(row[bins + 2].item<double>());
    buffer(dst, "max_val").fill_(row[bins + 3].item<double>());
  };
  load(h, all[0]);
  for (int r = 1; r < ctx.world_size(); ++r) {
    HistogramObserver other(h.spec(), h.configured_algorithm(), h.options(), bins);
    load(other, all[r]);
    h.merge(other);
  }
}

// In place, over ranks: each of `los` becomes its elementwise minimum and each of
// `his` its maximum, in one collective (the minimum of [los..., -his...]).
void min_max_all_reduce(Context& ctx, const std::vector<at::Tensor>& los, const std::vector<at::Tensor>& his,
                        const std::string& what) {
  std::vector<at::Tensor> parts;
  for (const auto& t : los) parts.push_back(t.reshape({-1}));
  for (const auto& t : his) parts.push_back(t.reshape({-1}).neg());
  std::vector<at::Tensor> flat{at::cat(parts)};
  ctx.all_reduce(flat, Op::kMin, what);
  int64_t off = 0;
  for (const auto& t : los) {
    t.copy_(flat[0].slice(0, off, off + t.numel()).view(t.sizes()));
    off += t.numel();
  }
  for (const auto& t : his) {
    t.copy_(flat[0].slice(0, off, off + t.numel()).neg().view(t.sizes()));
    off += t.numel();
  }
}

}  // namespace

void all_reduce_observers(fx::GraphModule& gm, Context& ctx) {
  if (!ctx.active()) return;
  at::NoGradGuard ng;
  std::vector<at::Tensor> mins, maxs;
  std::vector<std::string> names;
  for (const auto& item : gm.named_modules("", /*include_self=*/false)) {
    auto* fq = dynamic_cast<FakeQuantize*>(item.value().get());
    if (!fq) continue;
    ObserverBase& o = fq->observer();
    if (auto* h = dynamic_cast<HistogramObserver*>(&o)) {
      merge_histograms(*h, ctx);
    } else if (dynamic_cast<MinMaxObserver*>(&o) || dynamic_cast<PerChannelMinMaxObserver*>(&o)) {
      mins.push_back(buffer(o, "min_val"));
      maxs.push_back(buffer(o, "max_val"));
      names.push_back(o.tensor_name());
    }
  }
  if (mins.empty()) return;
  // Per-channel observers that saw no data have no channels yet: every rank must agree.
  std::vector<at::Tensor> lo_n, hi_n;
  for (const auto& t : mins) {
    lo_n.push_back(at::full({1}, static_cast<double>(t.numel()), at::kDouble));
    hi_n.push_back(lo_n.back().clone());
  }
  min_max_all_reduce(ctx, lo_n, hi_n, "all_reduce_observers (channel counts)");
  for (size_t i = 0; i < names.size(); ++i)
    if (lo_n[i].item<double>() != hi_n[i].item<double>())
      throw InternalError("all_reduce_observers: observer '" + names[i] + "' has different channel counts on different ranks");
  // One collective for every observer (their buffers are small and many).
  min_max_all_reduce(ctx, mins, maxs, "all_reduce_observers (min/max)");
}

void synchronize_observers(fx::GraphModule& gm, Context& ctx, bool enable) {
  for (const auto& item : gm.named_modules("", /*include_self=*/false)) {
    auto* fq = dynamic_cast<FakeQuantize*>(item.value().get());
    if (!fq) continue;
    if (!enable || !ctx.active()) {
      fq->set_observer_sync({});
      continue;
    }
    ObserverBase& o = fq->observer();
    if (dynamic_cast<HistogramObserver*>(&o))
      throw ConfigError("distributed QAT: the histogram observer of '" + o.tensor_name() +
                        "' cannot be synchronised per step; use minmax or moving_average_minmax for QAT");
    if (!dynamic_cast<MinMaxObserver*>(&o) && !dynamic_cast<PerChannelMinMaxObserver*>(&o)) continue;  // fixed qparams
    fq->set_observer_sync([&ctx](ObserverBase& ob) {
      at::NoGradGuard ng;
      min_max_all_reduce(ctx, {buffer(ob, "min_val")}, {buffer(ob, "max_val")},
                         "observer synchronisation ('" + ob.tensor_name() + "')");
    });
  }
}

void broadcast_parameters(torch::nn::Module& module, Context& ctx) {
  if (!ctx.active()) return;
  at::NoGradGuard ng;
  std::vector<at::Tensor> ts;
  for (auto& p : module.parameters()) ts.push_back(p.detach());
  for (auto& b : module.buffers()) ts.push_back(b);
  // Broadcast tensor by tensor in place (mixed dtypes: float weights, uint8 flags).
  ctx.broadcast(ts, 0, "broadcast_parameters");
}

struct GradientReducer::State {
  Context& ctx;
  bool alive = true;
  std::vector<at::Tensor> params;
  std::vector<std::vector<size_t>> buckets;  // indices into params
  std::vector<size_t> bucket_of;
  std::vector<at::Tensor> grads;             // this step's gradient of each parameter (from its hook)
  std::vector<size_t> ready;                 // gradients in per bucket
  std::vector<at::Tensor> flat;              // a started bucket's buffer
  int64_t overlapped = 0;
  explicit State(Context& c) : ctx(c) {}

  void start(size_t b) {
    std::vector<at::Tensor> parts;
    for (size_t i : buckets[b]) {
      const at::Tensor& g = grads[i].defined() ? grads[i] : params[i].grad();
      parts.push_back(g.defined() ? g.detach().reshape({-1}) : at::zeros({params[i].numel()}, params[i].options()));
    }
    flat[b] = at::cat(parts);
    ctx.all_reduce_start(flat[b], Op::kSum);
  }
  void on_grad(size_t i, const at::Tensor& g) {
    if (!alive || !ctx.active()) return;
    grads[i] = g;
    const size_t b = bucket_of[i];
    if (++ready[b] == buckets[b].size()) {
      start(b);
      ++overlapped;
    }
  }
};

GradientReducer::GradientReducer(torch::nn::Module& module, Context& ctx, int64_t bucket_bytes)
    : state_(std::make_shared<State>(ctx)) {
  State& s = *state_;
  for (auto& p : module.parameters())
    if (p.requires_grad()) s.params.push_back(p);
  int64_t bytes = 0;
  s.bucket_of.resize(s.params.size());
  for (size_t k = s.params.size(); k-- > 0;) {  // reverse: the order backward produces gradients
    if (s.buckets.empty() || bytes >= bucket_bytes || s.params[k].scalar_type() != s.params[s.buckets.back().front()].scalar_type()) {
      s.buckets.emplace_back();
      bytes = 0;
    }
    s.buckets.back().push_back(k);
    s.bucket_of[k] = s.buckets.size() - 1;
    bytes += s.params[k].numel() * static_cast<int64_t>(s.params[k].element_size());
  }
  s.grads.resize(s.params.size());
  s.ready.assign(s.buckets.size(), 0);
  s.flat.resize(s.buckets.size());
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i)
    s.params[i].register_hook([weak, i](const at::Tensor& g) {
      if (auto st = weak.lock()) st->on_grad(i, g);
    });
}

GradientReducer::~GradientReducer() { state_->alive = false; }

int64_t GradientReducer::overlapped_buckets() const { return state_->overlapped; }

void GradientReducer::reduce() {
  State& s = *state_;
  if (!s.ctx.active()) return;
  at::NoGradGuard ng;
  for (size_t b = 0; b < s.buckets.size(); ++b)
    if (s.ready[b] < s.buckets[b].size()) s.start(b);
  s.ctx.wait_pending("gradient all-reduce");
  const double inv = 1.0 / s.ctx.world_size();
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    int64_t off = 0;
    for (size_t i : s.buckets[b]) {
      at::Tensor& p = s.params[i];
      at::Tensor g = s.flat[b].slice(0, off, off + p.numel()).view(p.sizes()).mul(inv);
      if (p.grad().defined()) p.mutable_grad().copy_(g);
      else p.mutable_grad() = g.clone();
      off += p.numel();
    }
  }
  std::fill(s.grads.begin(), s.grads.end(), at::Tensor());
  std::fill(s.ready.begin(), s.ready.end(), 0);
}

}  // namespace qfx::quant::distributed
