#include "leaf_modules.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/upsampling.h>
#include <torch/nn/functional/upsampling.h>
#include <torch/nn/modules/container/functional.h>
#include <torch/csrc/jit/ir/ir.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/hardsigmoid.h>

#include <functional>
#include <map>
#include <cctype>
#include "qfx/error.h"

namespace qfx::fx::detail {

using c10::IValue;

std::string demangle_type(const std::string& qualified_name) {
  // Drop every "___torch_mangle_<digits>." (a scan: type names come from model files).
  static const std::string mangle = "___torch_mangle_";
  std::string s;
  size_t i = 0;
  while (i < qualified_name.size()) {
    const size_t at = qualified_name.find(mangle, i);
    if (at == std::string::npos) break;
    size_t j = at + mangle.size();
    while (j < qualified_name.size() && std::isdigit(static_cast<unsigned char>(qualified_name[j]))) ++j;
    const bool whole = j > at + mangle.size() && j < qualified_name.size() && qualified_name[j] == '.';
    s.append(qualified_name, i, (whole ? at : j) - i);
    i = whole ? j + 1 : j;
  }
  s.append(qualified_name, i, std::string::npos);
  const std::string prefix = "__torch__.";
  if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  return s;
}

std::string short_type(const std::string& qualified_name) {
  std::string s = demangle_type(qualified_name);
  auto dot = s.rfind('.');
  return dot == std::string::npos ? s : s.substr(dot + 1);
}

namespace {

// Hyper-parameters of one TorchScript leaf, read from class constants (scripted
// modules: torch.nn declares them in __constants__) or from the arguments of the
// single aten op in a traced module's forward.
class Reader {
 public:
  explicit Reader(torch::jit::Module& sm) : sm_(sm) {
    auto graph = sm.get_method("forward").graph();
    for (torch::jit::Node* n : graph->nodes()) {
      auto k = n->kind();
      if (k == c10::prim::Constant || k == c10::prim::GetAttr || k == c10::prim::ListConstruct ||
          k == c10::prim::TupleConstruct) {
        continue;
      }
      ops_.push_back(n);
    }
  }

  bool scripted() const { return sm_.type()->numConstants() > 0; }

  std::optional<IValue> constant(const std::string& name) const {
    if (sm_.type()->findConstantSlot(name)) return sm_.type()->getConstant(name);
    if (sm_.hasattr(name)) {
      IValue v = sm_.attr(name);
      if (!v.isModule() && !v.isTensor()) return v;
    }
    return std::nullopt;
  }

  /// The single compute op of a traced module if its kind is one of `kinds`.
  torch::jit::Node* op(std::initializer_list<const char*> kinds) const {
    if (ops_.size() != 1) return nullptr;
    for (const char* k : kinds) {
      if (ops_[0]->kind().toQualString() == std::string(k)) return ops_[0];
    }
    return nullptr;
  }

  /// Constant value of input `i` of `n` (prim::Constant or a list of them).
  static std::optional<IValue> input(torch::jit::Node* n, size_t i) {
    if (i >= n->inputs().size()) return std::nullopt;
    torch::jit::Value* v = n->input(i);
    if (auto c = torch::jit::toIValue(v)) return c;
    if (v->node()->kind() == c10::prim::ListConstruct) {
      auto elem = v->type()->expect<c10::ListType>()->getElementType();
      c10::impl::GenericList list(elem);
      for (auto* in : v->node()->inputs()) {
        auto c = torch::jit::toIValue(in);
        if (!c) return std::nullopt;
        list.push_back(*c);
      }
      return IValue(list);
    }
    return std::nullopt;
  }

  torch::jit::Module& sm_;
  std::vector<torch::jit::Node*> ops_;
};

std::vector<int64_t> ints(const IValue& v, size_t n) {
  std::vector<int64_t> out;
  if (v.isInt()) {
    out.assign(n, v.toInt());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) out.push_back(e.toInt());
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) out.push_back(e.toInt());
  }
  if (out.size() == 1 && n > 1) out.assign(n, out[0]);
  if (out.size() != n) throw TraceError("unexpected hyper-parameter shape");
  return out;
}

template <size_t D>
torch::ExpandingArray<D> arr(const IValue& v) {
  auto x = ints(v, D);
  return torch::ExpandingArray<D>(c10::IntArrayRef(x));
}

// Makes `native` (a parameter or buffer of the native module) and the TorchScript
// attribute `name` one and the same tensor.
void tie(torch::jit::Module& sm, const std::string& name, at::Tensor& native) {
  if (!sm.hasattr(name)) return;
  IValue v = sm.attr(name);
  if (!v.isTensor() || !native.defined()) return;
  at::Tensor src = v.toTensor();
  {
    at::NoGradGuard ng;
    native.set_data(src);
  }
  if (native.is_leaf()) native.requires_grad_(src.requires_grad());
  sm.setattr(name, native);
}

template <typename Holder>
LeafModule unary(Holder h) {
  auto impl = h.ptr();
  return {impl, tensor_call_fn(impl)};
}

template <typename Impl>
LeafModule leaf(std::shared_ptr<Impl> impl) {
  return {impl, tensor_call_fn(impl)};
}

bool has_tensor(torch::jit::Module& sm, const std::string& name) {
  return sm.hasattr(name) && sm.attr(name).isTensor();
}

template <size_t D, typename Holder, typename Options>
std::optional<LeafModule> make_conv(torch::jit::Module& sm, const Reader& r) {
  if (!has_tensor(sm, "weight")) return std::nullopt;
  at::Tensor w = sm.attr("weight").toTensor();
  const bool bias = has_tensor(sm, "bias");
  IValue stride, padding, dilation, groups;
  if (r.scripted()) {
    auto pm = r.constant("padding_mode");
    if (!pm || pm->toStringRef() != "zeros") return std::nullopt;
    stride = *r.constant("stride");
    padding = *r.constant("padding");
    dilation = *r.constant("dilation");
    groups = *r.constant("groups");
  } else if (auto* n = r.op({"aten::_convolution"})) {
    if (Reader::input(n, 6) && Reader::input(n, 6)->toBool()) return std::nullopt;  // transposed
    stride = *Reader::input(n, 3); padding = *Reader::input(n, 4); dilation = *Reader::input(n, 5);
    groups = *Reader::input(n, 8);
  } else if (auto* n2 = r.op({"aten::conv1d", "aten::conv2d", "aten::conv3d"})) {
    stride = *Reader::input(n2, 3); padding = *Reader::input(n2, 4); dilation = *Reader::input(n2, 5);
    groups = *Reader::input(n2, 6);
  } else {
    return std::nullopt;
  }
  const int64_t g = groups.toInt();
  Options o(w.size(1) * g, w.size(0), arr<D>(IValue(w.sizes().slice(2).vec())));
  o.stride(arr<D>(stride)).dilation(arr<D>(dilation)).groups(g).bias(bias);
  if (padding.isString()) {
    if (padding.toStringRef() == "same") o.padding(torch::kSame);
    else o.padding(torch::kValid);
  } else {
    o.padding(arr<D>(padding));
  }
  Holder m(o);
  tie(sm, "weight", m->weight);
  if (bias) tie(sm, "bias", m->bias);
  return unary(m);
}

std::optional<LeafModule> make_conv_transpose2d(torch::jit::Module& sm, const Reader& r) {
  if (!has_tensor(sm, "weight")) return std::nullopt;
  at::Tensor w = sm.attr("weight").toTensor();
  const bool bias = has_tensor(sm, "bias");
  IValue stride, padding, dilation, groups, output_padding;
  if (r.scripted()) {
    auto pm = r.constant("padding_mode");
    if (!pm || pm->toStringRef() != "zeros") return std::nullopt;
    stride = *r.constant("stride"); padding = *r.constant("padding"); dilation = *r.constant("dilation");
    groups = *r.constant("groups"); output_padding = *r.constant("output_padding");
  } else if (auto* n = r.op({"aten::_convolution"})) {
    if (!Reader::input(n, 6) || !Reader::input(n, 6)->toBool()) return std::nullopt;
    stride = *Reader::input(n, 3); padding = *Reader::input(n, 4); dilation = *Reader::input(n, 5);
    output_padding = *Reader::input(n, 7); groups = *Reader::input(n, 8);
  } else {
    return std::nullopt;
  }
  if (padding.isString()) return std::nullopt;
  const int64_t g = groups.toInt();
  torch::nn::ConvTranspose2dOptions o(w.size(0), w.size(1) * g, arr<2>(IValue(w.sizes().slice(2).vec())));
  o.stride(arr<2>(stride)).padding(arr<2>(padding)).dilation(arr<2>(dilation)).groups(g).bias(bias)
      .output_padding(arr<2>(output_padding));
  torch::nn::ConvTranspose2d m(o);
  tie(sm, "weight", m->weight);
  if (bias) tie(sm, "bias", m->bias);
  return unary(m);
}

std::optional<LeafModule> make_linear(torch::jit::Module& sm, const Reader& r) {
  if (!has_tensor(sm, "weight")) return std::nullopt;
  if (!r.scripted() && !r.op({"aten::linear"})) return std::nullopt;
  at::Tensor w = sm.attr("weight").toTensor();
  const bool bias = has_tensor(sm, "bias");
  torch::nn::Linear m(torch::nn::LinearOptions(w.size(1), w.size(0)).bias(bias));
  tie(sm, "weight", m->weight);
  if (bias) tie(sm, "bias", m->bias);
  return unary(m);
}

template <typename Holder>
std::optional<LeafModule> make_bn(torch::jit::Module& sm, const Reader& r) {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;
  if (r.scripted()) {
    eps = r.constant("eps")->toDouble();
    auto mo = r.constant("momentum");
    momentum = (mo && !mo->isNone()) ? std::optional<double>(mo->toDouble()) : std::nullopt;
  } else if (auto* n = r.op({"aten::batch_norm"})) {
    momentum = Reader::input(n, 6)->toDouble();
    eps = Reader::input(n, 7)->toDouble();
  } else {
    return std::nullopt;
  }
  const bool affine = has_tensor(sm, "weight");
  const bool track = has_tensor(sm, "running_mean");
  at::Tensor ref = affine ? sm.attr("weight").toTensor() : track ? sm.attr("running_mean").toTensor() : at::Tensor();
  if (!ref.defined()) return std::nullopt;
  torch::nn::BatchNormOptions o(ref.size(0));
  o.eps(eps).affine(affine).track_running_stats(track);
  if (momentum) o.momentum(*momentum); else o.momentum(c10::nullopt);
  Holder m(o);
  if (affine) { tie(sm, "weight", m->weight); tie(sm, "bias", m->bias); }
  if (track) {
    tie(sm, "running_mean", m->running_mean);
    tie(sm, "running_var", m->running_var);
    tie(sm, "num_batches_tracked", m->num_batches_tracked);
  }
  return unary(m);
}

// Leaves without hyper-parameters: a traced one must be exactly the expected op.
std::optional<LeafModule> simple(const Reader& r, std::initializer_list<const char*> traced_ops,
                                 const std::function<LeafModule()>& make) {
  if (!r.scripted() && !r.op(traced_ops)) return std::nullopt;
  return make();
}

std::optional<IValue> param(const Reader& r, const char* constant_name, std::initializer_list<const char*> ops,
                            size_t index) {
  if (auto c = r.constant(constant_name)) return c;
  if (auto* n = r.op(ops)) return Reader::input(n, index);
  return std::nullopt;
}

// Upsample: a functional leaf, because a scalar size/scale_factor only gets its
// rank from the input at run time.
std::optional<LeafModule> make_upsample(torch::jit::Module& sm, const Reader& r) {
  IValue size, scale;
  std::string mode;
  c10::optional<bool> align;
  if (r.scripted()) {
    size = *r.constant("size");
    scale = *r.constant("scale_factor");
    mode = r.constant("mode")->toStringRef();
    auto a = *r.constant("align_corners");
    if (!a.isNone()) align = a.toBool();
  } else if (auto* n = r.op({"aten::upsample_nearest2d", "aten::upsample_bilinear2d"})) {
    const bool bilinear = std::string(n->kind().toQualString()) == "aten::upsample_bilinear2d";
    auto s = Reader::input(n, 1);
    auto sc = Reader::input(n, bilinear ? 3 : 2);
    if (!s || !sc) return std::nullopt;
    size = *s;
    scale = *sc;
    mode = bilinear ? "bilinear" : "nearest";
    if (bilinear) align = Reader::input(n, 2)->toBool();
  } else {
    return std::nullopt;
  }
  auto as_vec = [](const IValue& v) {
    std::vector<IValue> out;
    if (v.isTuple()) out = v.toTupleRef().elements().vec();
    else if (v.isList()) out = v.toListRef().vec();
    else if (!v.isNone()) out = {v};
    return out;
  };
  std::vector<int64_t> sizes;
  for (const auto& e : as_vec(size)) sizes.push_back(e.toInt());
  std::vector<double> scales;
  for (const auto& e : as_vec(scale)) scales.push_back(e.toDouble());
  // UpsampleLeaf checks the mode and size/scale_factor; make_leaf turns its
  // std::invalid_argument into "trace through the module".
  return leaf(std::make_shared<UpsampleLeaf>(sizes, scales, mode, align));
}

}  // namespace

at::Tensor HardswishLeaf::forward(const at::Tensor& x) { return at::hardswish(x); }
at::Tensor HardsigmoidLeaf::forward(const at::Tensor& x) { return at::hardsigmoid(x); }

}  // namespace qfx::fx::detail

namespace qfx::fx {

UpsampleLeaf::UpsampleLeaf(std::vector<int64_t> sizes, std::vector<double> scales, std::string mode,
                           c10::optional<bool> align)
    : torch::nn::Module("Upsample"), sizes_(std::move(sizes)), scales_(std::move(scales)), mode_(std::move(mode)),
      align_(align) {
  if (sizes_.empty() == scales_.empty()) throw ArgumentError("Upsample: exactly one of size and scale_factor");
  if (mode_ == "nearest") interp_mode_ = torch::kNearest;
  else if (mode_ == "bilinear") interp_mode_ = torch::kBilinear;
  else if (mode_ == "linear") interp_mode_ = torch::kLinear;
  else if (mode_ == "bicubic") interp_mode_ = torch::kBicubic;
  else if (mode_ == "trilinear") interp_mode_ = torch::kTrilinear;
  else throw ArgumentError("Upsample: unknown mode '" + mode_ + "'");
}

at::Tensor UpsampleLeaf::forward(const at::Tensor& x) {
  namespace F = torch::nn::functional;
  F::InterpolateFuncOptions o;
  o.mode(interp_mode_);
  if (align_) o.align_corners(*align_);
  const size_t spatial = static_cast<size_t>(std::max<int64_t>(x.dim() - 2, 0));
  if (!sizes_.empty()) o.size(sizes_.size() == 1 ? std::vector<int64_t>(spatial, sizes_[0]) : sizes_);
  else o.scale_factor(scales_.size() == 1 ? std::vector<double>(spatial, scales_[0]) : scales_);
  return F::interpolate(x, o);
}

}  // namespace qfx::fx

namespace qfx::fx::detail {

// The torch.nn classes the tracer keeps as leaf modules, each with the builder that
// reads the scripted module's hyper-parameters into the libtorch module (or declines:
// nullopt, and the tracer traces through it). A new leaf class is one entry here.
using M = torch::jit::Module;
using Out = std::optional<LeafModule>;
using LeafBuilder = std::function<Out(M& sm, Reader& r)>;

const std::map<std::string, LeafBuilder>& leaf_builders() {
  static const std::map<std::string, LeafBuilder> b = {
      {"Conv1d", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return make_conv<1, torch::nn::Conv1d, torch::nn::Conv1dOptions>(sm, r);
       }},
      {"Conv2d", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return make_conv<2, torch::nn::Conv2d, torch::nn::Conv2dOptions>(sm, r);
       }},
      {"Conv3d", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return make_conv<3, torch::nn::Conv3d, torch::nn::Conv3dOptions>(sm, r);
       }},
      {"ConvTranspose2d", []([[maybe_unused]] M& sm, Reader& r) -> Out { return make_conv_transpose2d(sm, r); }},
      {"Linear", []([[maybe_unused]] M& sm, Reader& r) -> Out { return make_linear(sm, r); }},
      {"BatchNorm1d", []([[maybe_unused]] M& sm, Reader& r) -> Out { return make_bn<torch::nn::BatchNorm1d>(sm, r); }},
      {"BatchNorm2d", []([[maybe_unused]] M& sm, Reader& r) -> Out { return make_bn<torch::nn::BatchNorm2d>(sm, r); }},
      {"BatchNorm3d", []([[maybe_unused]] M& sm, Reader& r) -> Out { return make_bn<torch::nn::BatchNorm3d>(sm, r); }},
      {"ReLU", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return simple(r, {"aten::relu", "aten::relu_"}, [] { return unary(torch::nn::ReLU()); });
       }},
      {"ReLU6", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return simple(r, {"aten::hardtanh", "aten::hardtanh_", "aten::relu6"}, [] { return unary(torch::nn::ReLU6()); });
       }},
      {"Sigmoid", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return simple(r, {"aten::sigmoid"}, [] { return unary(torch::nn::Sigmoid()); });
       }},
      {"Tanh", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return simple(r, {"aten::tanh"}, [] { return unary(torch::nn::Tanh()); });
       }},
      {"SiLU", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return simple(r, {"aten::silu", "aten::silu_"}, [] { return unary(torch::nn::SiLU()); });
       }},
      {"Hardswish", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return simple(r, {"aten::hardswish", "aten::hardswish_"}, [] { return leaf(std::make_shared<HardswishLeaf>()); });
       }},
      {"Hardsigmoid", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         return simple(r, {"aten::hardsigmoid", "aten::hardsigmoid_"}, [] { return leaf(std::make_shared<HardsigmoidLeaf>()); });
       }},
      {"Identity", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         if (!r.scripted() && !r.ops_.empty()) return std::nullopt;
         return unary(torch::nn::Identity());
       }},
      {"LeakyReLU", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         auto s = param(r, "negative_slope", {"aten::leaky_relu", "aten::leaky_relu_"}, 1);
         if (!s) return std::nullopt;
         return unary(torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(s->toDouble())));
       }},
      {"GELU", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         auto a = param(r, "approximate", {"aten::gelu"}, 1);
         if (!a) return std::nullopt;
         return unary(torch::nn::GELU(torch::nn::GELUOptions().approximate(a->toStringRef())));
       }},
      {"Softmax", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         auto d = param(r, "dim", {"aten::softmax"}, 1);
         if (!d || d->isNone()) return std::nullopt;
         return unary(torch::nn::Softmax(torch::nn::SoftmaxOptions(d->toInt())));
       }},
      {"Dropout", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         auto p = param(r, "p", {"aten::dropout", "aten::dropout_"}, 1);
         if (!p) return std::nullopt;
         return unary(torch::nn::Dropout(torch::nn::DropoutOptions(p->toDouble())));
       }},
      {"Flatten", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         auto s = param(r, "start_dim", {"aten::flatten"}, 1);
         auto e = param(r, "end_dim", {"aten::flatten"}, 2);
         if (!s || !e) return std::nullopt;
         return unary(torch::nn::Flatten(torch::nn::FlattenOptions().start_dim(s->toInt()).end_dim(e->toInt())));
       }},
      {"MaxPool2d", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         const char* op = "aten::max_pool2d";
         auto k = param(r, "kernel_size", {op}, 1), s = param(r, "stride", {op}, 2), p = param(r, "padding", {op}, 3),
              d = param(r, "dilation", {op}, 4), c = param(r, "ceil_mode", {op}, 5);
         if (!k || !s || !p || !d || !c) return std::nullopt;
         if (auto ri = r.constant("return_indices"); ri && ri->toBool()) return std::nullopt;
         torch::nn::MaxPool2dOptions o(arr<2>(*k));
         o.stride(arr<2>(s->isNone() || (s->isList() && s->toListRef().empty()) ? *k : *s)).padding(arr<2>(*p)).dilation(arr<2>(*d)).ceil_mode(c->toBool());
         return unary(torch::nn::MaxPool2d(o));
       }},
      {"AvgPool2d", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         const char* op = "aten::avg_pool2d";
         auto k = param(r, "kernel_size", {op}, 1), s = param(r, "stride", {op}, 2), p = param(r, "padding", {op}, 3),
              c = param(r, "ceil_mode", {op}, 4), ci = param(r, "count_include_pad", {op}, 5),
              dv = param(r, "divisor_override", {op}, 6);
         if (!k || !s || !p || !c || !ci || !dv) return std::nullopt;
         torch::nn::AvgPool2dOptions o(arr<2>(*k));
         o.stride(arr<2>(s->isNone() || (s->isList() && s->toListRef().empty()) ? *k : *s)).padding(arr<2>(*p)).ceil_mode(c->toBool())
             .count_include_pad(ci->toBool());
         if (!dv->isNone()) o.divisor_override(dv->toInt());
         return unary(torch::nn::AvgPool2d(o));
       }},
      {"AdaptiveAvgPool2d", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         auto s = param(r, "output_size", {"aten::adaptive_avg_pool2d"}, 1);
         if (!s) return std::nullopt;
         std::vector<c10::optional<int64_t>> out;
         if (s->isInt()) out = {s->toInt(), s->toInt()};
         else for (const auto& e : s->isTuple() ? s->toTupleRef().elements().vec() : s->toListRef().vec())
           out.push_back(e.isNone() ? c10::optional<int64_t>() : c10::optional<int64_t>(e.toInt()));
         if (out.size() == 1) out.push_back(out[0]);
         if (out.size() != 2) return std::nullopt;
         return unary(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({out[0], out[1]})));
       }},
      {"LayerNorm", []([[maybe_unused]] M& sm, Reader& r) -> Out {
         auto shape = param(r, "normalized_shape", {"aten::layer_norm"}, 1);
         auto eps = param(r, "eps", {"aten::layer_norm"}, 4);
         if (!shape || !eps) return std::nullopt;
         std::vector<int64_t> s;
         for (const auto& e : shape->isTuple() ? shape->toTupleRef().elements().vec() : shape->toListRef().vec()) s.push_back(e.toInt());
         const bool affine = has_tensor(sm, "weight");
         torch::nn::LayerNorm m(torch::nn::LayerNormOptions(s).eps(eps->toDouble()).elementwise_affine(affine));
         if (affine) { tie(sm, "weight", m->weight); tie(sm, "bias", m->bias); }
         return unary(m);
       }},
      {"Upsample", []([[maybe_unused]] M& sm, Reader& r) -> Out { return make_upsample(sm, r); }},
  };
  return b;
}

std::optional<LeafModule> make_leaf(torch::jit::Module& sm) {
  const std::string type = demangle_type(sm.type()->name()->qualifiedName());
  if (type.rfind("torch.nn.modules.", 0) != 0) return std::nullopt;
  const std::string cls = short_type(type);
  if (!sm.find_method("forward")) return std::nullopt;
  auto it = leaf_builders().find(cls);
  if (it == leaf_builders().end()) return std::nullopt;
  Reader r(sm);
  try {
    return it->second(sm, r);
  } catch (const std::exception&) {
    // Hyper-parameters of an unexpected form: trace through the module instead.
    return std::nullopt;
  }
}

}  // namespace qfx::fx::detail
