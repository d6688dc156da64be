// Leaf records of the normalization layers: BatchNorm1d/2d/3d and LayerNorm.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/normalization.h>

#include "registry.h"

namespace qfx::fx::detail {
namespace {

using c10::IValue;

// nn.BatchNormNd: eps and momentum (None: a cumulative average) from the class
// constants or the traced aten::batch_norm; affine and track_running_stats from
// which tensors the module holds.
template <typename Holder>
std::optional<LoadedModule> trace_batch_norm(const ScriptReader& r) {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;
  if (r.scripted()) {
    eps = r.constant("eps")->toDouble();
    auto mo = r.constant("momentum");
    momentum = (mo && !mo->isNone()) ? std::optional<double>(mo->toDouble()) : std::nullopt;
  } else if (auto* n = r.op({"aten::batch_norm"})) {
    momentum = ScriptReader::input(n, 6)->toDouble();
    eps = ScriptReader::input(n, 7)->toDouble();
  } else {
    return std::nullopt;
  }
  const bool affine = r.has_tensor("weight");
  const bool track = r.has_tensor("running_mean");
  at::Tensor ref = affine ? r.tensor("weight") : track ? r.tensor("running_mean") : at::Tensor();
  if (!ref.defined()) return std::nullopt;
  torch::nn::BatchNormOptions o(ref.size(0));
  o.eps(eps).affine(affine).track_running_stats(track);
  if (momentum) o.momentum(*momentum); else o.momentum(c10::nullopt);
  Holder m(o);
  if (affine) {
    r.tie("weight", m->weight);
    r.tie("bias", m->bias);
  }
  if (track) {
    r.tie("running_mean", m->running_mean);
    r.tie("running_var", m->running_var);
    r.tie("num_batches_tracked", m->num_batches_tracked);
  }
  return leaf(m);
}

// An eval-mode batch norm (running statistics); a training-mode one normalizes by the batch's.
template <typename Holder>
std::optional<LoadedModule> rebuild_batch_norm(const std::string&, const LeafArgs& a) {
  if (a.boolean("training", false)) return std::nullopt;
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias"), mean = a.tensor("running_mean"), var = a.tensor("running_var");
  if (!mean.defined() || !var.defined() || w.defined() != b.defined()) return std::nullopt;
  torch::nn::BatchNormOptions o(mean.size(0));
  o.eps(a.num("eps", 1e-5)).momentum(a.num("momentum", 0.1)).affine(w.defined()).track_running_stats(true);
  Holder m(o);
  if (w.defined()) {
    share(m->weight, w);
    share(m->bias, b);
  }
  share(m->running_mean, mean);
  share(m->running_var, var);
  return leaf(m);
}

template <typename Impl>
void save_batch_norm(const Impl& m, ModuleConfig& c) {
  const auto& o = m.options;
  c.insert("num_features", o.num_features());
  c.insert("eps", o.eps());
  c.insert("momentum", o.momentum() ? IValue(*o.momentum()) : IValue());
  c.insert("affine", o.affine());
  c.insert("track_running_stats", o.track_running_stats());
}

template <typename Holder>
std::shared_ptr<typename Holder::Impl> load_batch_norm(const IValue& c) {
  torch::nn::BatchNormOptions o(config_at(c, "num_features").toInt());
  o.eps(config_at(c, "eps").toDouble()).affine(config_at(c, "affine").toBool())
      .track_running_stats(config_at(c, "track_running_stats").toBool());
  IValue mo = config_at(c, "momentum");
  if (mo.isNone()) o.momentum(c10::nullopt); else o.momentum(mo.toDouble());
  return Holder(o).ptr();
}

template <typename Holder>
LeafModuleRecord batch_norm(const std::string& cls) {
  using Impl = typename Holder::Impl;
  return leaf_record<Impl>(cls, save_batch_norm<Impl>, load_batch_norm<Holder>)
      .traced(trace_batch_norm<Holder>)
      .rebuilt_from({"aten::batch_norm", "aten::_native_batch_norm_legit_no_training"}, rebuild_batch_norm<Holder>)
      .owns({"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
}

std::optional<LoadedModule> trace_layer_norm(const ScriptReader& r) {
  auto shape = r.param("normalized_shape", {"aten::layer_norm"}, 1);
  auto eps = r.param("eps", {"aten::layer_norm"}, 4);
  if (!shape || !eps) return std::nullopt;
  std::vector<int64_t> s;
  for (const auto& e : shape->isTuple() ? shape->toTupleRef().elements().vec() : shape->toListRef().vec())
    s.push_back(e.toInt());
  const bool affine = r.has_tensor("weight");
  torch::nn::LayerNorm m(torch::nn::LayerNormOptions(s).eps(eps->toDouble()).elementwise_affine(affine));
  if (affine) {
    r.tie("weight", m->weight);
    r.tie("bias", m->bias);
  }
  return leaf(m);
}

std::optional<LoadedModule> rebuild_layer_norm(const std::string&, const LeafArgs& a) {
  const nlohmann::json* s = a.arg("normalized_shape");
  if (!s || !s->contains("as_ints")) return std::nullopt;
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias");
  if (w.defined() != b.defined()) return std::nullopt;
  torch::nn::LayerNorm m(torch::nn::LayerNormOptions(s->at("as_ints").get<std::vector<int64_t>>())
                             .eps(a.num("eps", 1e-5))
                             .elementwise_affine(w.defined()));
  if (w.defined()) {
    share(m->weight, w);
    share(m->bias, b);
  }
  return leaf(m);
}

void save_layer_norm(const torch::nn::LayerNormImpl& m, ModuleConfig& c) {
  c.insert("normalized_shape", m.options.normalized_shape());
  c.insert("eps", m.options.eps());
  c.insert("elementwise_affine", m.options.elementwise_affine());
}

std::shared_ptr<torch::nn::LayerNormImpl> load_layer_norm(const IValue& c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions(config_at(c, "normalized_shape").toIntVector())
                                  .eps(config_at(c, "eps").toDouble())
                                  .elementwise_affine(config_at(c, "elementwise_affine").toBool()))
      .ptr();
}

}  // namespace

void register_norm_leaves(LeafRegistry& r) {
  r.add(batch_norm<torch::nn::BatchNorm1d>("BatchNorm1d"));
  r.add(batch_norm<torch::nn::BatchNorm2d>("BatchNorm2d"));
  r.add(batch_norm<torch::nn::BatchNorm3d>("BatchNorm3d"));
  r.add(leaf_record<torch::nn::LayerNormImpl>("LayerNorm", save_layer_norm, load_layer_norm)
            .traced(trace_layer_norm)
            .rebuilt_from({"aten::layer_norm", "aten::native_layer_norm"}, rebuild_layer_norm)
            .owns({"weight", "bias"}));
}

}  // namespace qfx::fx::detail
