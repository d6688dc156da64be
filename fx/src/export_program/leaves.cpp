// Standard torch.nn layers rebuilt from an exported program's aten nodes.
#include "leaves.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include "../leaf_modules.h"

namespace qfx::fx::detail {
namespace {
using nlohmann::json;

// An argument the rebuilt layer cannot take (a list of another length): the node
// stays a call_function.
struct NotThisLayer {};

template <typename M>
LoadedModule leaf(std::shared_ptr<M> m) {
  return {m, tensor_call_fn(m)};
}
template <typename Holder>
LoadedModule leaf(Holder h) {
  return leaf(h.ptr());
}

// An int-list argument as D values (one value applies to every dim), or `def`.
template <size_t D>
torch::ExpandingArray<D> ints(const LeafArgs& a, const std::string& name, int64_t def) {
  std::vector<int64_t> v;
  if (const json* j = a.arg(name)) {
    if (j->contains("as_ints")) v = j->at("as_ints").get<std::vector<int64_t>>();
    else if (j->contains("as_int")) v = {j->at("as_int").get<int64_t>()};
  }
  if (v.empty()) v = {def};
  if (v.size() == 1) v.assign(D, v[0]);
  if (v.size() != D) throw NotThisLayer{};
  return torch::ExpandingArray<D>(v);
}

double num(const LeafArgs& a, const std::string& name, double def) {
  const json* j = a.arg(name);
  if (!j) return def;
  if (j->contains("as_float")) return j->at("as_float").get<double>();
  if (j->contains("as_int")) return static_cast<double>(j->at("as_int").get<int64_t>());
  return def;
}
int64_t integer(const LeafArgs& a, const std::string& name, int64_t def) {
  const json* j = a.arg(name);
  return j && j->contains("as_int") ? j->at("as_int").get<int64_t>() : def;
}
bool boolean(const LeafArgs& a, const std::string& name, bool def) {
  const json* j = a.arg(name);
  return j && j->contains("as_bool") ? j->at("as_bool").get<bool>() : def;
}

void share(torch::Tensor& param, const at::Tensor& t) {
  torch::NoGradGuard g;
  param.set_data(t);
}

template <size_t D, typename Holder, typename Options>
std::optional<LoadedModule> conv(const LeafArgs& a, bool same_padding) {
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias");
  if (!w.defined() || w.dim() != static_cast<int64_t>(D) + 2) return std::nullopt;
  const int64_t g = integer(a, "groups", 1);
  Options o(w.size(1) * g, w.size(0), torch::ExpandingArray<D>(w.sizes().slice(2).vec()));
  o.stride(ints<D>(a, "stride", 1)).dilation(ints<D>(a, "dilation", 1)).groups(g).bias(b.defined());
  if (same_padding) {
    const json* p = a.arg("padding");
    const std::string mode = p && p->contains("as_string") ? p->at("as_string").get<std::string>() : "valid";
    if (mode == "same") o.padding(torch::kSame);
    else o.padding(torch::kValid);
  } else {
    o.padding(ints<D>(a, "padding", 0));
  }
  Holder m(o);
  share(m->weight, w);
  if (b.defined()) share(m->bias, b);
  return leaf(m);
}

std::optional<LoadedModule> conv_transpose2d(const LeafArgs& a) {
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias");
  if (!w.defined() || w.dim() != 4) return std::nullopt;
  const int64_t g = integer(a, "groups", 1);
  torch::nn::ConvTranspose2dOptions o(w.size(0), w.size(1) * g, torch::ExpandingArray<2>(w.sizes().slice(2).vec()));
  o.stride(ints<2>(a, "stride", 1)).padding(ints<2>(a, "padding", 0)).output_padding(ints<2>(a, "output_padding", 0))
      .dilation(ints<2>(a, "dilation", 1)).groups(g).bias(b.defined());
  torch::nn::ConvTranspose2d m(o);
  share(m->weight, w);
  if (b.defined()) share(m->bias, b);
  return leaf(m);
}

std::optional<LoadedModule> linear(const LeafArgs& a) {
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias");
  if (!w.defined() || w.dim() != 2) return std::nullopt;
  torch::nn::Linear m(torch::nn::LinearOptions(w.size(1), w.size(0)).bias(b.defined()));
  share(m->weight, w);
  if (b.defined()) share(m->bias, b);
  return leaf(m);
}

template <typename Holder>
std::optional<LoadedModule> batch_norm(const LeafArgs& a) {
  if (boolean(a, "training", false)) return std::nullopt;  // exported in training mode: statistics from the batch
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias"), mean = a.tensor("running_mean"), var = a.tensor("running_var");
  if (!mean.defined() || !var.defined() || w.defined() != b.defined()) return std::nullopt;
  torch::nn::BatchNormOptions o(mean.size(0));
  o.eps(num(a, "eps", 1e-5)).momentum(num(a, "momentum", 0.1)).affine(w.defined()).track_running_stats(true);
  Holder m(o);
  if (w.defined()) {
    share(m->weight, w);
    share(m->bias, b);
  }
  share(m->running_mean, mean);
  share(m->running_var, var);
  return leaf(m);
}

std::optional<LoadedModule> layer_norm(const LeafArgs& a) {
  const json* s = a.arg("normalized_shape");
  if (!s || !s->contains("as_ints")) return std::nullopt;
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias");
  if (w.defined() != b.defined()) return std::nullopt;
  torch::nn::LayerNorm m(torch::nn::LayerNormOptions(s->at("as_ints").get<std::vector<int64_t>>())
                             .eps(num(a, "eps", 1e-5))
                             .elementwise_affine(w.defined()));
  if (w.defined()) {
    share(m->weight, w);
    share(m->bias, b);
  }
  return leaf(m);
}

// Layers without parameters, by class: the aten targets that are the whole layer.
std::optional<LoadedModule> activation(const std::string& cls, const std::string& t, const LeafArgs& a) {
  auto is = [&](std::initializer_list<const char*> ts) {
    for (const char* x : ts)
      if (t == x) return true;
    return false;
  };
  if (cls == "ReLU" && is({"aten::relu", "aten::relu_"})) return leaf(torch::nn::ReLU());
  if (cls == "ReLU6" && is({"aten::relu6", "aten::hardtanh", "aten::hardtanh_"}) && num(a, "min_val", 0) == 0 &&
      num(a, "max_val", 6) == 6)
    return leaf(torch::nn::ReLU6());
  if (cls == "Sigmoid" && is({"aten::sigmoid", "aten::sigmoid_"})) return leaf(torch::nn::Sigmoid());
  if (cls == "Tanh" && is({"aten::tanh", "aten::tanh_"})) return leaf(torch::nn::Tanh());
  if (cls == "SiLU" && is({"aten::silu", "aten::silu_"})) return leaf(torch::nn::SiLU());
  if (cls == "Hardswish" && is({"aten::hardswish", "aten::hardswish_"})) return leaf(std::make_shared<HardswishLeaf>());
  if (cls == "Hardsigmoid" && is({"aten::hardsigmoid", "aten::hardsigmoid_"})) return leaf(std::make_shared<HardsigmoidLeaf>());
  if (cls == "LeakyReLU" && is({"aten::leaky_relu", "aten::leaky_relu_"}))
    return leaf(torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(num(a, "negative_slope", 0.01))));
  if (cls == "GELU" && is({"aten::gelu", "aten::gelu_"})) {
    const json* ap = a.arg("approximate");
    return leaf(torch::nn::GELU(torch::nn::GELUOptions().approximate(
        ap && ap->contains("as_string") ? ap->at("as_string").get<std::string>() : std::string("none"))));
  }
  if (cls == "Softmax" && is({"aten::softmax.int", "aten::_softmax"}) && a.arg("dim"))
    return leaf(torch::nn::Softmax(torch::nn::SoftmaxOptions(integer(a, "dim", -1))));
  if (cls == "Dropout" && is({"aten::dropout", "aten::dropout_"}) && !boolean(a, "train", false))
    return leaf(torch::nn::Dropout(torch::nn::DropoutOptions(num(a, "p", 0.5))));
  if (cls == "Flatten" && is({"aten::flatten.using_ints"}))
    return leaf(torch::nn::Flatten(torch::nn::FlattenOptions().start_dim(integer(a, "start_dim", 0)).end_dim(integer(a, "end_dim", -1))));
  return std::nullopt;
}

// A 2-D pooling's stride: its kernel size when the node gives none (PyTorch's default).
torch::ExpandingArray<2> pool_stride(const LeafArgs& a) {
  const json* s = a.arg("stride");
  const bool given = s && s->contains("as_ints") && !s->at("as_ints").empty();
  return given ? ints<2>(a, "stride", 1) : ints<2>(a, "kernel_size", 1);
}

std::optional<LoadedModule> pooling(const std::string& cls, const std::string& t, const LeafArgs& a) {
  if (cls == "MaxPool2d" && t == "aten::max_pool2d") {
    torch::nn::MaxPool2dOptions o(ints<2>(a, "kernel_size", 1));
    o.stride(pool_stride(a)).padding(ints<2>(a, "padding", 0)).dilation(ints<2>(a, "dilation", 1)).ceil_mode(boolean(a, "ceil_mode", false));
    return leaf(torch::nn::MaxPool2d(o));
  }
  if (cls == "AvgPool2d" && t == "aten::avg_pool2d") {
    torch::nn::AvgPool2dOptions o(ints<2>(a, "kernel_size", 1));
    o.stride(pool_stride(a)).padding(ints<2>(a, "padding", 0)).ceil_mode(boolean(a, "ceil_mode", false)).count_include_pad(boolean(a, "count_include_pad", true));
    if (const json* d = a.arg("divisor_override"); d && d->contains("as_int")) o.divisor_override(d->at("as_int").get<int64_t>());
    return leaf(torch::nn::AvgPool2d(o));
  }
  if (cls == "AdaptiveAvgPool2d" && t == "aten::adaptive_avg_pool2d") {
    const auto out = ints<2>(a, "output_size", 1);
    return leaf(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({(*out)[0], (*out)[1]})));
  }
  return std::nullopt;
}

}  // namespace

const json* LeafArgs::arg(const std::string& name) const {
  for (const auto& in : node.at("inputs"))
    if (in.at("name").get<std::string>() == name) return &in.at("arg");
  return nullptr;
}

at::Tensor LeafArgs::tensor(const std::string& name) const {
  const json* j = arg(name);
  if (!j || !j->contains("as_tensor")) {
    if (j && j->contains("as_optional_tensor") && j->at("as_optional_tensor").contains("as_tensor"))
      return tensor_of(j->at("as_optional_tensor").at("as_tensor").at("name").get<std::string>());
    return {};
  }
  return tensor_of(j->at("as_tensor").at("name").get<std::string>());
}

const std::vector<std::string>& leaf_tensor_names(const std::string& cls) {
  static const std::vector<std::string> weighted = {"weight", "bias"};
  static const std::vector<std::string> bn = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
  static const std::vector<std::string> none;
  if (cls.rfind("BatchNorm", 0) == 0) return bn;
  if (cls.rfind("Conv", 0) == 0 || cls == "Linear" || cls == "LayerNorm") return weighted;
  return none;
}

std::optional<LoadedModule> rebuild_leaf(const std::string& cls, const std::string& t, const LeafArgs& a) {
  try {
    if (cls == "Conv1d" && (t == "aten::conv1d" || t == "aten::conv1d.padding"))
      return conv<1, torch::nn::Conv1d, torch::nn::Conv1dOptions>(a, t == "aten::conv1d.padding");
    if (cls == "Conv2d" && (t == "aten::conv2d" || t == "aten::conv2d.padding"))
      return conv<2, torch::nn::Conv2d, torch::nn::Conv2dOptions>(a, t == "aten::conv2d.padding");
    if (cls == "Conv3d" && (t == "aten::conv3d" || t == "aten::conv3d.padding"))
      return conv<3, torch::nn::Conv3d, torch::nn::Conv3dOptions>(a, t == "aten::conv3d.padding");
    if (cls == "ConvTranspose2d" && t == "aten::conv_transpose2d.input") return conv_transpose2d(a);
    if (cls == "Linear" && t == "aten::linear") return linear(a);
    const bool bn_op = t == "aten::batch_norm" || t == "aten::_native_batch_norm_legit_no_training";
    if (cls == "BatchNorm1d" && bn_op) return batch_norm<torch::nn::BatchNorm1d>(a);
    if (cls == "BatchNorm2d" && bn_op) return batch_norm<torch::nn::BatchNorm2d>(a);
    if (cls == "BatchNorm3d" && bn_op) return batch_norm<torch::nn::BatchNorm3d>(a);
    if (cls == "LayerNorm" && t == "aten::layer_norm") return layer_norm(a);
    if (auto m = activation(cls, t, a)) return m;
    return pooling(cls, t, a);
  } catch (const NotThisLayer&) {
    return std::nullopt;
  }
}

}  // namespace qfx::fx::detail
