// Leaf records of the 2-D poolings: MaxPool2d, AvgPool2d and AdaptiveAvgPool2d.
#include <torch/nn/modules/pooling.h>

#include "qfx/error.h"
#include "registry.h"

namespace qfx::fx::detail {
namespace {

using c10::IValue;
using Built = std::optional<LoadedModule>;

// A pooling's stride: its kernel size when none is given (PyTorch's default).
const IValue& script_stride(const IValue& stride, const IValue& kernel) {
  return stride.isNone() || (stride.isList() && stride.toListRef().empty()) ? kernel : stride;
}
torch::ExpandingArray<2> export_stride(const LeafArgs& a) {
  const nlohmann::json* s = a.arg("stride");
  const bool given = s && s->contains("as_ints") && !s->at("as_ints").empty();
  return given ? a.ints<2>("stride", 1) : a.ints<2>("kernel_size", 1);
}

Built trace_max_pool2d(const ScriptReader& r) {
  const std::vector<std::string> op = {"aten::max_pool2d"};
  auto k = r.param("kernel_size", op, 1), s = r.param("stride", op, 2), p = r.param("padding", op, 3),
       d = r.param("dilation", op, 4), c = r.param("ceil_mode", op, 5);
  if (!k || !s || !p || !d || !c) return std::nullopt;
  if (auto ri = r.constant("return_indices"); ri && ri->toBool()) return std::nullopt;
  torch::nn::MaxPool2dOptions o(script_array<2>(*k));
  o.stride(script_array<2>(script_stride(*s, *k))).padding(script_array<2>(*p)).dilation(script_array<2>(*d))
      .ceil_mode(c->toBool());
  return leaf(torch::nn::MaxPool2d(o));
}

Built rebuild_max_pool2d(const std::string&, const LeafArgs& a) {
  torch::nn::MaxPool2dOptions o(a.ints<2>("kernel_size", 1));
  o.stride(export_stride(a)).padding(a.ints<2>("padding", 0)).dilation(a.ints<2>("dilation", 1))
      .ceil_mode(a.boolean("ceil_mode", false));
  return leaf(torch::nn::MaxPool2d(o));
}

void save_max_pool2d(const torch::nn::MaxPool2dImpl& m, ModuleConfig& c) {
  const auto& o = m.options;
  c.insert("kernel_size", config_ints<2>(o.kernel_size()));
  c.insert("stride", config_ints<2>(o.stride()));
  c.insert("padding", config_ints<2>(o.padding()));
  c.insert("dilation", config_ints<2>(o.dilation()));
  c.insert("ceil_mode", o.ceil_mode());
}

std::shared_ptr<torch::nn::MaxPool2dImpl> load_max_pool2d(const IValue& c) {
  torch::nn::MaxPool2dOptions o(config_array<2>(c, "kernel_size"));
  o.stride(config_array<2>(c, "stride")).padding(config_array<2>(c, "padding"))
      .dilation(config_array<2>(c, "dilation")).ceil_mode(config_at(c, "ceil_mode").toBool());
  return torch::nn::MaxPool2d(o).ptr();
}

Built trace_avg_pool2d(const ScriptReader& r) {
  const std::vector<std::string> op = {"aten::avg_pool2d"};
  auto k = r.param("kernel_size", op, 1), s = r.param("stride", op, 2), p = r.param("padding", op, 3),
       c = r.param("ceil_mode", op, 4), ci = r.param("count_include_pad", op, 5),
       dv = r.param("divisor_override", op, 6);
  if (!k || !s || !p || !c || !ci || !dv) return std::nullopt;
  torch::nn::AvgPool2dOptions o(script_array<2>(*k));
  o.stride(script_array<2>(script_stride(*s, *k))).padding(script_array<2>(*p)).ceil_mode(c->toBool())
      .count_include_pad(ci->toBool());
  if (!dv->isNone()) o.divisor_override(dv->toInt());
  return leaf(torch::nn::AvgPool2d(o));
}

Built rebuild_avg_pool2d(const std::string&, const LeafArgs& a) {
  torch::nn::AvgPool2dOptions o(a.ints<2>("kernel_size", 1));
  o.stride(export_stride(a)).padding(a.ints<2>("padding", 0)).ceil_mode(a.boolean("ceil_mode", false))
      .count_include_pad(a.boolean("count_include_pad", true));
  if (const nlohmann::json* d = a.arg("divisor_override"); d && d->contains("as_int"))
    o.divisor_override(d->at("as_int").get<int64_t>());
  return leaf(torch::nn::AvgPool2d(o));
}

void save_avg_pool2d(const torch::nn::AvgPool2dImpl& m, ModuleConfig& c) {
  const auto& o = m.options;
  c.insert("kernel_size", config_ints<2>(o.kernel_size()));
  c.insert("stride", config_ints<2>(o.stride()));
  c.insert("padding", config_ints<2>(o.padding()));
  c.insert("ceil_mode", o.ceil_mode());
  c.insert("count_include_pad", o.count_include_pad());
  c.insert("divisor_override", o.divisor_override() ? IValue(*o.divisor_override()) : IValue());
}

std::shared_ptr<torch::nn::AvgPool2dImpl> load_avg_pool2d(const IValue& c) {
  torch::nn::AvgPool2dOptions o(config_array<2>(c, "kernel_size"));
  o.stride(config_array<2>(c, "stride")).padding(config_array<2>(c, "padding"))
      .ceil_mode(config_at(c, "ceil_mode").toBool()).count_include_pad(config_at(c, "count_include_pad").toBool());
  IValue d = config_at(c, "divisor_override");
  if (!d.isNone()) o.divisor_override(d.toInt());
  return torch::nn::AvgPool2d(o).ptr();
}

// Output size entries: an int, or None (that dim keeps its input size).
using OutputSize = std::vector<c10::optional<int64_t>>;

OutputSize optional_ints(const std::vector<IValue>& v) {
  OutputSize out;
  for (const auto& e : v) out.push_back(e.isNone() ? c10::optional<int64_t>() : c10::optional<int64_t>(e.toInt()));
  return out;
}

Built trace_adaptive_avg_pool2d(const ScriptReader& r) {
  auto s = r.param("output_size", {"aten::adaptive_avg_pool2d"}, 1);
  if (!s) return std::nullopt;
  OutputSize out;
  if (s->isInt()) out = {s->toInt(), s->toInt()};
  else out = optional_ints(s->isTuple() ? s->toTupleRef().elements().vec() : s->toListRef().vec());
  if (out.size() == 1) out.push_back(out[0]);
  if (out.size() != 2) return std::nullopt;
  return leaf(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({out[0], out[1]})));
}

Built rebuild_adaptive_avg_pool2d(const std::string&, const LeafArgs& a) {
  const auto out = a.ints<2>("output_size", 1);
  return leaf(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({(*out)[0], (*out)[1]})));
}

void save_adaptive_avg_pool2d(const torch::nn::AdaptiveAvgPool2dImpl& m, ModuleConfig& c) {
  c10::impl::GenericList sizes(c10::OptionalType::create(c10::IntType::get()));
  for (const auto& s : *m.options.output_size()) sizes.push_back(s ? IValue(*s) : IValue());
  c.insert("output_size", IValue(sizes));
}

std::shared_ptr<torch::nn::AdaptiveAvgPool2dImpl> load_adaptive_avg_pool2d(const IValue& c) {
  const OutputSize out = optional_ints(config_at(c, "output_size").toListRef().vec());
  if (out.size() != 2) throw IoError("output_size needs 2 entries");
  return torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({out[0], out[1]})).ptr();
}

}  // namespace

void register_pooling_leaves(LeafRegistry& r) {
  r.add(leaf_record<torch::nn::MaxPool2dImpl>("MaxPool2d", save_max_pool2d, load_max_pool2d)
            .traced(trace_max_pool2d)
            .rebuilt_from({"aten::max_pool2d"}, rebuild_max_pool2d));
  r.add(leaf_record<torch::nn::AvgPool2dImpl>("AvgPool2d", save_avg_pool2d, load_avg_pool2d)
            .traced(trace_avg_pool2d)
            .rebuilt_from({"aten::avg_pool2d"}, rebuild_avg_pool2d));
  r.add(leaf_record<torch::nn::AdaptiveAvgPool2dImpl>("AdaptiveAvgPool2d", save_adaptive_avg_pool2d,
                                                      load_adaptive_avg_pool2d)
            .traced(trace_adaptive_avg_pool2d)
            .rebuilt_from({"aten::adaptive_avg_pool2d"}, rebuild_adaptive_avg_pool2d));
}

}  // namespace qfx::fx::detail
