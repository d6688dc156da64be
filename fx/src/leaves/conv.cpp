// Leaf records of the convolution layers: Conv1d, Conv2d, Conv3d, ConvTranspose2d
// (torch.nn padding_mode "zeros" when traced; all padding modes serialize).
#include <torch/nn/modules/conv.h>

#include "qfx/error.h"
#include "qfx/fx/torch_compat.h"
#include "registry.h"

namespace qfx::fx::detail {
namespace {

using c10::IValue;

// Hyper-parameters of a TorchScript convolution (nn.ConvNd's constants, or the traced aten op's inputs).
struct ScriptConv {
  IValue stride, padding, dilation, groups, output_padding;
};

std::optional<ScriptConv> read_script_conv(const ScriptReader& r, bool transposed) {
  ScriptConv c;
  if (r.scripted()) {
    auto pm = r.constant("padding_mode");
    if (!pm || pm->toStringRef() != "zeros") return std::nullopt;
    c.stride = *r.constant("stride");
    c.padding = *r.constant("padding");
    c.dilation = *r.constant("dilation");
    c.groups = *r.constant("groups");
    if (transposed) c.output_padding = *r.constant("output_padding");
  } else if (auto* n = r.op({"aten::_convolution"})) {
    const auto t = ScriptReader::input(n, 6);
    if ((t && t->toBool()) != transposed) return std::nullopt;
    c.stride = *ScriptReader::input(n, 3);
    c.padding = *ScriptReader::input(n, 4);
    c.dilation = *ScriptReader::input(n, 5);
    if (transposed) c.output_padding = *ScriptReader::input(n, 7);
    c.groups = *ScriptReader::input(n, 8);
  } else if (auto* n2 = transposed ? nullptr : r.op({"aten::conv1d", "aten::conv2d", "aten::conv3d"})) {
    c.stride = *ScriptReader::input(n2, 3);
    c.padding = *ScriptReader::input(n2, 4);
    c.dilation = *ScriptReader::input(n2, 5);
    c.groups = *ScriptReader::input(n2, 6);
  } else {
    return std::nullopt;
  }
  return c;
}

// Ties weight and bias of a freshly built convolution to the TorchScript module's.
template <typename Holder>
LoadedModule tie_weighted(const ScriptReader& r, Holder m, bool bias) {
  r.tie("weight", m->weight);
  if (bias) r.tie("bias", m->bias);
  return leaf(m);
}

template <size_t D, typename Holder, typename Options>
std::optional<LoadedModule> trace_conv(const ScriptReader& r) {
  if (!r.has_tensor("weight")) return std::nullopt;
  const at::Tensor w = r.tensor("weight");
  const bool bias = r.has_tensor("bias");
  const auto c = read_script_conv(r, /*transposed=*/false);
  if (!c) return std::nullopt;
  const int64_t g = c->groups.toInt();
  Options o(w.size(1) * g, w.size(0), script_array<D>(IValue(w.sizes().slice(2).vec())));
  o.stride(script_array<D>(c->stride)).dilation(script_array<D>(c->dilation)).groups(g).bias(bias);
  if (c->padding.isString()) {
    if (c->padding.toStringRef() == "same") o.padding(torch::kSame);
    else o.padding(torch::kValid);
  } else {
    o.padding(script_array<D>(c->padding));
  }
  return tie_weighted(r, Holder(o), bias);
}

std::optional<LoadedModule> trace_conv_transpose2d(const ScriptReader& r) {
  if (!r.has_tensor("weight")) return std::nullopt;
  const at::Tensor w = r.tensor("weight");
  const bool bias = r.has_tensor("bias");
  const auto c = read_script_conv(r, /*transposed=*/true);
  if (!c || c->padding.isString()) return std::nullopt;
  const int64_t g = c->groups.toInt();
  torch::nn::ConvTranspose2dOptions o(w.size(0), w.size(1) * g, script_array<2>(IValue(w.sizes().slice(2).vec())));
  o.stride(script_array<2>(c->stride)).padding(script_array<2>(c->padding)).dilation(script_array<2>(c->dilation))
      .groups(g).bias(bias).output_padding(script_array<2>(c->output_padding));
  return tie_weighted(r, torch::nn::ConvTranspose2d(o), bias);
}

// Shares weight and bias of a rebuilt convolution with the archive's tensors.
template <typename Holder>
LoadedModule share_weighted(Holder m, const at::Tensor& w, const at::Tensor& b) {
  share(m->weight, w);
  if (b.defined()) share(m->bias, b);
  return leaf(m);
}

// aten::convNd (int padding), aten::convNd.padding (string padding "same" / "valid"),
// or Core ATen's aten::convolution when it is not transposed (the weight's rank says D).
template <size_t D, typename Holder, typename Options>
std::optional<LoadedModule> rebuild_conv(const std::string& target, const LeafArgs& a) {
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias");
  if (!w.defined() || w.dim() != static_cast<int64_t>(D) + 2) return std::nullopt;
  if (target == "aten::convolution" && a.boolean("transposed", false)) return std::nullopt;
  const int64_t g = a.integer("groups", 1);
  Options o(w.size(1) * g, w.size(0), torch::ExpandingArray<D>(w.sizes().slice(2).vec()));
  o.stride(a.ints<D>("stride", 1)).dilation(a.ints<D>("dilation", 1)).groups(g).bias(b.defined());
  if (target.size() > 8 && target.compare(target.size() - 8, 8, ".padding") == 0) {
    if (a.string("padding", "valid") == "same") o.padding(torch::kSame);
    else o.padding(torch::kValid);
  } else {
    o.padding(a.ints<D>("padding", 0));
  }
  return share_weighted(Holder(o), w, b);
}

std::optional<LoadedModule> rebuild_conv_transpose2d(const std::string&, const LeafArgs& a) {
  const at::Tensor w = a.tensor("weight"), b = a.tensor("bias");
  if (!w.defined() || w.dim() != 4) return std::nullopt;
  const int64_t g = a.integer("groups", 1);
  torch::nn::ConvTranspose2dOptions o(w.size(0), w.size(1) * g, torch::ExpandingArray<2>(w.sizes().slice(2).vec()));
  o.stride(a.ints<2>("stride", 1)).padding(a.ints<2>("padding", 0)).output_padding(a.ints<2>("output_padding", 0))
      .dilation(a.ints<2>("dilation", 1)).groups(g).bias(b.defined());
  return share_weighted(torch::nn::ConvTranspose2d(o), w, b);
}

const char* padding_mode_name(const torch::nn::detail::conv_padding_mode_t& m) {
  if (compat::get_if<torch::enumtype::kZeros>(&m)) return "zeros";
  if (compat::get_if<torch::enumtype::kReflect>(&m)) return "reflect";
  if (compat::get_if<torch::enumtype::kReplicate>(&m)) return "replicate";
  return "circular";
}

torch::nn::detail::conv_padding_mode_t parse_padding_mode(const std::string& s) {
  if (s == "zeros") return torch::kZeros;
  if (s == "reflect") return torch::kReflect;
  if (s == "replicate") return torch::kReplicate;
  if (s == "circular") return torch::kCircular;
  throw IoError("unknown padding_mode '" + s + "'");
}

// Conv1d/2d/3d and ConvTranspose2d share ConvNdOptions.
template <size_t D, typename Impl>
void save_conv(const Impl& m, ModuleConfig& c) {
  const auto& o = m.options;
  c.insert("in_channels", o.in_channels());
  c.insert("out_channels", o.out_channels());
  c.insert("kernel_size", config_ints<D>(o.kernel_size()));
  c.insert("stride", config_ints<D>(o.stride()));
  if (auto* p = compat::get_if<torch::ExpandingArray<D>>(&o.padding())) c.insert("padding", config_ints<D>(*p));
  else if (compat::get_if<torch::enumtype::kSame>(&o.padding())) c.insert("padding", std::string("same"));
  else c.insert("padding", std::string("valid"));
  c.insert("output_padding", config_ints<D>(o.output_padding()));
  c.insert("dilation", config_ints<D>(o.dilation()));
  c.insert("groups", o.groups());
  c.insert("bias", o.bias());
  c.insert("padding_mode", std::string(padding_mode_name(o.padding_mode())));
}

template <size_t D, typename Options>
Options load_conv_options(const IValue& c) {
  Options o(config_at(c, "in_channels").toInt(), config_at(c, "out_channels").toInt(), config_array<D>(c, "kernel_size"));
  o.stride(config_array<D>(c, "stride")).dilation(config_array<D>(c, "dilation"))
      .groups(config_at(c, "groups").toInt()).bias(config_at(c, "bias").toBool())
      .padding_mode(parse_padding_mode(config_at(c, "padding_mode").toStringRef()));
  return o;
}

template <size_t D, typename Holder, typename Options>
std::shared_ptr<typename Holder::Impl> load_conv(const IValue& c) {
  Options o = load_conv_options<D, Options>(c);
  IValue p = config_at(c, "padding");
  if (p.isString()) {
    if (p.toStringRef() == "same") o.padding(torch::kSame);
    else o.padding(torch::kValid);
  } else {
    o.padding(config_array<D>(c, "padding"));
  }
  return Holder(o).ptr();
}

std::shared_ptr<torch::nn::ConvTranspose2dImpl> load_conv_transpose2d(const IValue& c) {
  auto o = load_conv_options<2, torch::nn::ConvTranspose2dOptions>(c);
  o.padding(config_array<2>(c, "padding")).output_padding(config_array<2>(c, "output_padding"));
  return torch::nn::ConvTranspose2d(o).ptr();
}

// Conv<D>d: traced from nn.ConvNd or aten::_convolution / aten::convNd, rebuilt from aten::convNd[.padding].
template <size_t D, typename Holder, typename Options>
LeafModuleRecord conv(const std::string& cls, const std::string& aten) {
  using Impl = typename Holder::Impl;
  return leaf_record<Impl>(cls, save_conv<D, Impl>, load_conv<D, Holder, Options>)
      .traced(trace_conv<D, Holder, Options>)
      .rebuilt_from({aten, aten + ".padding", "aten::convolution"}, rebuild_conv<D, Holder, Options>)
      .owns({"weight", "bias"});
}

}  // namespace

void register_conv_leaves(LeafRegistry& r) {
  r.add(conv<1, torch::nn::Conv1d, torch::nn::Conv1dOptions>("Conv1d", "aten::conv1d"));
  r.add(conv<2, torch::nn::Conv2d, torch::nn::Conv2dOptions>("Conv2d", "aten::conv2d"));
  r.add(conv<3, torch::nn::Conv3d, torch::nn::Conv3dOptions>("Conv3d", "aten::conv3d"));
  r.add(leaf_record<torch::nn::ConvTranspose2dImpl>("ConvTranspose2d", save_conv<2, torch::nn::ConvTranspose2dImpl>,
                                                    load_conv_transpose2d)
            .traced(trace_conv_transpose2d)
            .rebuilt_from({"aten::conv_transpose2d.input"}, rebuild_conv_transpose2d)
            .owns({"weight", "bias"}));
}

}  // namespace qfx::fx::detail
