// The layers ptq.mixed_precision searches (see mixed_precision_layers.h).
#include "mixed_precision_layers.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "qfx/error.h"
#include "qfx/quant/block_quant.h"
#include "qfx/quant/op_names.h"

namespace qfx::quant::detail {
namespace {

// The layer's weight read as [out, ...] output channels first.
int64_t out_channels(const SearchedWeight& w) { return w.float_value.size(w.out_axis); }

SearchedLayer make_layer(fx::GraphModule& gm, const QConfigMapping& mapping, fx::Node* n, const std::string& path) {
  SearchedLayer l;
  l.info.layer = path;
  l.info.node = n->name();
  l.info.object_type = node_object_type(*n, gm);
  l.base = mapping.resolve(path, l.info.object_type, &l.info.matched_by);
  l.float_activations = l.base && l.base->activation.keep_float;
  return l;
}

void add_weight(SearchedLayer& l, fx::Node* n, const at::Tensor& live, FakeQuantize* fq, int64_t out_axis) {
  for (const auto& w : l.weights)
    if (w.live.is_same(live)) return;  // one weight read twice (a tied projection)
  SearchedWeight w{live, fq, live.detach().clone(), out_axis, n, 0};
  l.info.weights += live.numel();
  l.info.linear = l.info.linear && live.dim() == 2;
  l.weights.push_back(std::move(w));
}

}  // namespace

std::vector<SearchedLayer> searched_layers(fx::GraphModule& gm, const QConfigMapping& mapping, std::vector<std::string>& notes) {
  std::vector<SearchedLayer> out;
  std::map<std::string, size_t> functional;  // module path -> index in out
  std::map<std::string, bool> module_seen;
  for (fx::Node* n : gm.graph().nodes()) {
    if (n->op() == fx::Opcode::kCallModule) {
      auto f = std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(n->target()));
      if (!f || !f->weight_fake_quant() || module_seen[n->target()]) continue;
      module_seen[n->target()] = true;
      SearchedLayer l = make_layer(gm, mapping, n, n->target());
      if (!l.base) continue;
      add_weight(l, n, f->weight(), f->weight_fake_quant(), f->weight_out_axis());
      l.output = output_fake_quant(gm, n->name());
      out.push_back(std::move(l));
    } else if (const auto fl = functional_linear(gm, n)) {
      const std::string path = node_module_path(*n);
      if (path.empty()) {
        notes.push_back(n->name() + ": a functional linear outside any module has no qconfig.module_name entry; not searched");
        continue;
      }
      auto [it, added] = functional.emplace(path, out.size());
      if (added) {
        SearchedLayer l = make_layer(gm, mapping, n, path);
        l.functional = true;
        out.push_back(std::move(l));
      }
      add_weight(out[it->second], n, gm.get_attr(fl->weight_attr->target()), fl->fq, 0);
    }
  }
  // A module path claimed by a weighted module and by functional linears alike is one entry.
  std::vector<SearchedLayer> kept;
  std::map<std::string, int> paths;
  for (const auto& l : out) ++paths[l.info.layer];
  for (auto& l : out) {
    if (!l.base || l.weights.empty()) continue;
    if (paths[l.info.layer] > 1) {
      notes.push_back(l.info.layer + ": a module and functional linears inside it share one qconfig entry; not searched");
      continue;
    }
    kept.push_back(std::move(l));
  }
  return kept;
}

void count_macs(fx::GraphModule& gm, std::vector<SearchedLayer>& layers, const std::vector<at::Tensor>& sample) {
  at::NoGradGuard ng;
  const int64_t batch = std::max<int64_t>(sample.at(0).size(0), 1);
  // Modules: their outputs' sizes, all in one forward through wrapped call functions.
  std::vector<std::tuple<std::string, std::shared_ptr<torch::nn::Module>, fx::CallFn>> wrapped;
  for (auto& l : layers)
    for (auto& w : l.weights) {
      if (l.functional) continue;
      const std::string path = w.node->target();
      const fx::CallFn original = gm.module_fn(path);
      SearchedWeight* sw = &w;
      wrapped.emplace_back(path, gm.get_submodule(path), original);
      gm.replace_submodule(path, gm.get_submodule(path), [original, sw, batch](std::vector<c10::IValue>& a) {
        c10::IValue y = original(a);
        if (y.isTensor()) sw->uses = std::max<int64_t>(y.toTensor().numel() / batch / out_channels(*sw), 1);
        return y;
      });
    }
  struct Restore {
    fx::GraphModule& gm;
    decltype(wrapped)& w;
    ~Restore() {
      for (auto& [path, m, fn] : w) gm.replace_submodule(path, m, fn);
    }
  } restore{gm, wrapped};
  if (!wrapped.empty()) gm.forward(std::vector<c10::IValue>(sample.begin(), sample.end()));
  // Functional linears: their inputs' sizes (rows of the [.., in] input).
  for (auto& l : layers)
    for (auto& w : l.weights)
      if (l.functional)
        for_each_input_of(gm, w.node, {sample}, [&](const at::Tensor& x) {
          w.uses = std::max<int64_t>(x.numel() / batch / w.float_value.size(1), 1);
        });
  for (auto& l : layers) {
    l.info.macs = 0;
    for (const auto& w : l.weights) l.info.macs += w.float_value.numel() * std::max<int64_t>(w.uses, 1);
  }
}

ObserverSpec candidate_weight_spec(const SearchedLayer& l, const PrecisionCandidate& c, const BackendConfig& backend,
                                   const MixedPrecisionOptions& o) {
  const QConfigPtr q = candidate_qconfig(*l.base, c, o.block_size, l.info.linear);
  ObserverSpec s = resolve_tensor_qconfig(q->weight, backend, /*is_weight=*/true, /*qat=*/false, l.info.node);
  s.kind = s.spec.per_channel ? ObserverKind::kPerChannelMinMax : ObserverKind::kMinMax;
  s.algorithm = Algorithm::kMinMax;
  return s;
}

namespace {

// Bytes of one weight at weight spec `s`: codes, one float32 scale per group, zero points
// (affine) in the codes' width.
int64_t weight_bytes(const SearchedWeight& w, const QuantSpec& s) {
  const int64_t bits = s.bits();
  const int64_t channels = out_channels(w);
  const int64_t groups = s.block_size > 0 ? channels * block_count(w.float_value.size(1), s.block_size)
                                          : (s.per_channel ? channels : 1);
  const int64_t zero_bits = s.qscheme == QScheme::kAffine ? groups * bits : 0;
  return (w.float_value.numel() * bits + 7) / 8 + groups * 4 + (zero_bits + 7) / 8;
}

// MAC cost of candidate `c` on layer `l`: the target's entry, else 1 / 2 / 4 for 8-bit,
// 16-bit and float activations.
double mac_cost(const SearchedLayer& l, const PrecisionCandidate& c, const MixedPrecisionOptions& o) {
  if (auto it = o.mac_cost.find(c.name); it != o.mac_cost.end()) return it->second;
  if (c.is_float() || (l.float_activations && c.activation_bits == 0)) return 4.0;
  return c.activation_bits == 16 ? 2.0 : 1.0;
}

// Why layer `l` cannot take candidate `c`; empty if it can.
std::string unavailable(const SearchedLayer& l, const PrecisionCandidate& c, const BackendConfig& backend) {
  if (c.activation_bits == 8 && l.float_activations) return "its activations are float (weight-only)";
  if (c.activation_bits == 16) {
    if (l.functional) return "functional linears share their module's entry with its other ops";
    if (l.float_activations) return "its activations are float (weight-only)";
    if (!l.output) return "its output is not quantized";
    if (std::find(backend.activation.dtypes.begin(), backend.activation.dtypes.end(), QDType::kInt16) ==
        backend.activation.dtypes.end())
      return "the target has no s16 activations";
  }
  if (c.is_float() && l.functional && !l.float_activations)
    return "functional linears share their module's entry with its other ops, which float would change";
  return "";
}

}  // namespace

void cost_candidates(SearchedLayer& l, const std::vector<PrecisionCandidate>& cands, const BackendConfig& backend,
                     const MixedPrecisionOptions& o, std::vector<std::string>& notes) {
  std::vector<std::pair<std::pair<int64_t, double>, int>> order;  // ((bytes, latency), index)
  l.latency.assign(cands.size(), 0);
  for (size_t i = 0; i < cands.size(); ++i) {
    const PrecisionCandidate& c = cands[i];
    if (const std::string why = unavailable(l, c, backend); !why.empty()) {
      notes.push_back(l.info.layer + ": " + c.name + " skipped: " + why);
      continue;
    }
    int64_t bytes = 0;
    if (c.is_float()) {
      for (const auto& w : l.weights) bytes += w.float_value.numel() * 4;
    } else {
      const ObserverSpec s = candidate_weight_spec(l, c, backend, o);
      for (const auto& w : l.weights) bytes += weight_bytes(w, s.spec);
    }
    l.info.bytes[c.name] = bytes;
    l.latency[i] = static_cast<double>(l.info.macs) * mac_cost(l, c, o);
    order.push_back({{bytes, l.latency[i]}, static_cast<int>(i)});
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  l.candidates.clear();
  for (const auto& e : order) l.candidates.push_back(e.second);
}

LayerPrecision::LayerPrecision(SearchedLayer& l, const BackendConfig& backend, const MixedPrecisionOptions& o)
    : l_(l), backend_(backend), o_(o) {}

void LayerPrecision::set(const PrecisionCandidate& c) {
  reset();
  at::NoGradGuard ng;
  changed_ = true;
  const ObserverSpec spec = c.is_float() ? ObserverSpec{} : candidate_weight_spec(l_, c, backend_, o_);
  for (auto& w : l_.weights) {
    w.fq->enable_fake_quant(false);
    if (c.is_float()) continue;  // the live weight holds its float value
    ObserverSpec s = spec;
    if (s.spec.per_channel && s.spec.block_size == 0) s.spec.ch_axis = w.out_axis;
    auto fq = std::make_shared<FakeQuantize>(make_observer(s));
    fq->observer().set_tensor_name(l_.info.node + " weight");
    fq->enable_observer(true);
    w.live.detach().copy_(fq->forward(w.float_value));
  }
  if (c.activation_bits == 16) wide_ = std::make_unique<Int16Output>(l_.output);
}

void LayerPrecision::reset() {
  if (!changed_) return;
  at::NoGradGuard ng;
  for (auto& w : l_.weights) {
    w.live.detach().copy_(w.float_value);
    w.fq->enable_fake_quant(true);
  }
  if (wide_) wide_->undo();
  wide_.reset();
  changed_ = false;
}

}  // namespace qfx::quant::detail
