// Helpers shared by the PTQ algorithms (see layers.h).
#include "layers.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "qfx/quant/fake_quantize.h"
#include "qfx/error.h"

namespace qfx::quant {

FloatWeights snapshot_float_weights(fx::GraphModule& gm) {
  at::NoGradGuard ng;
  FloatWeights fw;
  for (const auto& l : detail::weighted_layers(gm)) {
    const at::Tensor& w = l.module->weight();
    const at::Tensor& b = l.module->bias();
    fw.layers[l.path] = {w.detach().clone(), b.defined() ? b.detach().clone() : at::zeros({l.module->out_channels()})};
  }
  return fw;
}

namespace detail {

std::vector<WeightedLayer> weighted_layers(fx::GraphModule& gm) {
  std::vector<WeightedLayer> out;
  std::set<std::string> seen;
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallModule || !seen.insert(n->target()).second) continue;
    auto f = std::dynamic_pointer_cast<FusedConvLinear>(gm.get_submodule(n->target()));
    if (f && f->weight_fake_quant()) out.push_back({n->target(), f, n->name()});
  }
  return out;
}

std::vector<std::vector<at::Tensor>> take_samples(const NextBatch& data, int64_t n) {
  std::vector<std::vector<at::Tensor>> out;
  int64_t have = 0;
  while (have < n) {
    std::vector<at::Tensor> b = data();
    if (b.empty()) break;
    const int64_t take = std::min<int64_t>(b.at(0).size(0), n - have);
    for (auto& t : b) t = t.slice(0, 0, take);
    have += take;
    out.push_back(std::move(b));
  }
  return out;
}

void for_each_input(fx::GraphModule& gm, const std::string& path, const std::vector<std::vector<at::Tensor>>& batches,
                    const std::function<void(const at::Tensor&)>& visit) {
  at::NoGradGuard ng;
  auto module = gm.get_submodule(path);
  const fx::CallFn original = gm.module_fn(path);
  auto calls = std::make_shared<int64_t>(0);
  gm.replace_submodule(path, module, [original, calls, &visit](std::vector<c10::IValue>& a) {
    visit(a.at(0).toTensor().detach());
    ++*calls;
    return original(a);
  });
  struct Restore {
    fx::GraphModule& gm;
    const std::string& path;
    std::shared_ptr<torch::nn::Module> module;
    const fx::CallFn& fn;
    ~Restore() { gm.replace_submodule(path, module, fn); }
  } restore{gm, path, module, original};
  for (const auto& b : batches) gm.forward(std::vector<c10::IValue>(b.begin(), b.end()));
  if (*calls == 0) throw InternalError("layer '" + path + "' did not run on the calibration data");
}

std::optional<FunctionalLinear> functional_linear(fx::GraphModule& gm, fx::Node* n) {
  if (n->op() != fx::Opcode::kCallFunction || n->target().rfind("aten::linear", 0) != 0 || n->args().size() < 2 ||
      !n->args()[1].is_node())
    return std::nullopt;
  fx::Node* fq_node = n->args()[1].node;
  auto* fq = fq_node->op() == fx::Opcode::kCallModule ? dynamic_cast<FakeQuantize*>(gm.get_submodule(fq_node->target()).get())
                                                      : nullptr;
  if (!fq || fq_node->args().empty() || !fq_node->args()[0].is_node()) return std::nullopt;
  fx::Node* w = fq_node->args()[0].node;
  if (w->op() != fx::Opcode::kGetAttr) return std::nullopt;
  return FunctionalLinear{n, w, fq, w->users().size() != 1 || fq_node->users().size() != 1};
}

std::shared_ptr<FakeQuantize> output_fake_quant(fx::GraphModule& gm, const std::string& node) {
  for (const fx::Node* n : gm.graph().nodes()) {
    auto it = n->meta().find("qfx_observer_of");
    if (n->op() == fx::Opcode::kCallModule && it != n->meta().end() && it->second.toStringRef() == node)
      return std::dynamic_pointer_cast<FakeQuantize>(gm.get_submodule(n->target()));
  }
  return nullptr;
}

Int16Output::Int16Output(std::shared_ptr<FakeQuantize> fq) : fq_(std::move(fq)), old_(fq_->observer().spec()) {
  QuantSpec s = old_;
  const QuantSpec w = QuantSpec::make(QDType::kInt16, old_.qscheme, 16);
  s.dtype = w.dtype;
  s.quant_min = w.quant_min;
  s.quant_max = w.quant_max;
  s.custom_range = false;
  fq_->observer().set_spec(s);
  fq_->calculate_qparams();
}

void Int16Output::undo() {
  fq_->observer().set_spec(old_);
  fq_->calculate_qparams();
}

void set_attr_copy(fx::GraphModule& gm, fx::Node* attr, const at::Tensor& value, const std::string& suffix) {
  const std::string name = gm.graph().unique_name(attr->target() + suffix);
  gm.add_tensor(name, value.detach().contiguous(), /*is_buffer=*/false);
  attr->set_target(name);
}

void for_each_input_of(fx::GraphModule& gm, fx::Node* reader, const std::vector<std::vector<at::Tensor>>& batches,
                       const std::function<void(const at::Tensor&)>& visit) {
  fx::Node* arg = reader->args().at(0).node;
  const std::string path = gm.graph().unique_name("input_tap");
  gm.add_submodule(path, std::make_shared<torch::nn::Module>(), [](std::vector<c10::IValue>& a) { return a.at(0); });
  fx::Node* tap = nullptr;
  {
    auto guard = gm.graph().inserting_before(reader);
    tap = gm.graph().call_module(path, {fx::Argument(arg)}, {}, path);
  }
  tap->meta()["is_tensor"] = true;
  reader->replace_input_with(arg, tap);
  struct Remove {
    fx::GraphModule& gm;
    fx::Node *reader, *arg, *tap;
    std::string path;
    ~Remove() {
      reader->replace_input_with(tap, arg);
      gm.graph().erase_node(tap);
      gm.remove_submodule(path);
    }
  } remove{gm, reader, arg, tap, path};
  for_each_input(gm, path, batches, visit);
}

at::Tensor capture_input(fx::GraphModule& gm, const std::string& path, const std::vector<std::vector<at::Tensor>>& batches) {
  std::vector<at::Tensor> got;
  for_each_input(gm, path, batches, [&got](const at::Tensor& x) { got.push_back(x); });
  return at::cat(got, 0);
}

void observe_weight_if_uncalibrated(FakeQuantize& fq, FusedConvLinear& f) {
  if (!fq.observer().has_data() && !fq.qparams_frozen()) {
    fq.enable_observer(true);
    fq.forward(f.weight().detach());
    fq.disable_observer();
  }
}

std::pair<at::Tensor, at::Tensor> capture_float_and_quantized_input(fx::GraphModule& gm, const std::string& path,
                                                                     const std::vector<std::vector<at::Tensor>>& batches,
                                                                     const FloatWeights& reference) {
  at::Tensor x_float;
  {
    UseFloatWeights use(gm, reference);
    set_quant_state(gm, QuantState::kFloat);
    x_float = capture_input(gm, path, batches);
  }
  set_quant_state(gm, QuantState::kFakeQuant);
  disable_observer(gm);
  return {x_float, capture_input(gm, path, batches)};
}

UseFloatWeights::UseFloatWeights(fx::GraphModule& gm, const FloatWeights& reference) {
  at::NoGradGuard ng;
  for (const auto& l : weighted_layers(gm)) {
    auto it = reference.layers.find(l.path);
    if (it == reference.layers.end()) continue;
    Saved s;
    s.weight = l.module->weight();
    s.weight_now = s.weight.detach().clone();
    s.weight.detach().copy_(it->second.first);
    s.bias = l.module->bias();
    if (s.bias.defined()) {
      s.bias_now = s.bias.detach().clone();
      s.bias.detach().copy_(it->second.second);
    }
    saved_.push_back(std::move(s));
  }
}

UseFloatWeights::~UseFloatWeights() {
  at::NoGradGuard ng;
  for (auto& s : saved_) {
    s.weight.detach().copy_(s.weight_now);
    if (s.bias.defined()) s.bias.detach().copy_(s.bias_now);
  }
}

at::Tensor along(const at::Tensor& v, int64_t rank, int64_t axis) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = -1;
  return v.reshape(shape);
}

int64_t output_axis(const FusedConvLinear& f, const at::Tensor& y) {
  return f.op() == FusedConvLinear::Op::kLinear ? y.dim() - 1 : 1;
}

at::Tensor run_all(fx::GraphModule& gm, const std::vector<std::vector<at::Tensor>>& samples, const char* who) {
  std::vector<at::Tensor> outs;
  for (const auto& b : samples) {
    const c10::IValue v = gm.forward(std::vector<c10::IValue>(b.begin(), b.end()));
    if (!v.isTensor()) throw ArgumentError(std::string(who) + ": the model's output is not one tensor");
    outs.push_back(v.toTensor());
  }
  return at::cat(outs, 0);
}

namespace {
void flatten_into(const c10::IValue& v, std::vector<at::Tensor>* out, const char* who) {
  if (v.isTensor()) {
    out->push_back(v.toTensor().reshape({-1}).to(at::kFloat));
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) flatten_into(e, out, who);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) flatten_into(e, out, who);
  } else if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict()) flatten_into(e.value(), out, who);
  } else {
    throw ArgumentError(std::string(who) + ": a model output is " + v.tagKind() + ", not a tensor");
  }
}
}  // namespace

at::Tensor run_all_flat(fx::GraphModule& gm, const std::vector<std::vector<at::Tensor>>& samples, const char* who) {
  std::vector<at::Tensor> outs;
  for (const auto& b : samples) flatten_into(gm.forward(std::vector<c10::IValue>(b.begin(), b.end())), &outs, who);
  if (outs.empty()) throw ArgumentError(std::string(who) + ": the model has no tensor output");
  return at::cat(outs, 0);
}

double sqnr_db(const at::Tensor& ref, const at::Tensor& x) {
  const double s = ref.to(at::kDouble).pow(2).sum().item<double>();
  const double n = (ref.to(at::kDouble) - x.to(at::kDouble)).pow(2).sum().item<double>();
  return 10.0 * std::log10(std::max(s, 1e-30) / std::max(n, 1e-30));
}

}  // namespace detail
}  // namespace qfx::quant
