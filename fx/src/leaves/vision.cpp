// Leaf record of torch.nn's vision layer Upsample (qfx::fx::UpsampleLeaf, a
// functional module: a scalar size or scale_factor only gets its rank from the
// input at run time). torch.export programs call aten::upsample_* directly: no rebuild.
#include <torch/nn/functional/upsampling.h>

#include "qfx/error.h"
#include "qfx/fx/upsample.h"
#include "registry.h"

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
namespace {

using c10::IValue;

// size / scale_factor as a list: one value, a tuple or list of them, or none.
std::vector<IValue> as_list(const IValue& v) {
  if (v.isTuple()) return v.toTupleRef().elements().vec();
  if (v.isList()) return v.toListRef().vec();
  if (!v.isNone()) return {v};
  return {};
}

std::optional<LoadedModule> trace_upsample(const ScriptReader& r) {
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
    auto s = ScriptReader::input(n, 1);
    auto sc = ScriptReader::input(n, bilinear ? 3 : 2);
    if (!s || !sc) return std::nullopt;
    size = *s;
    scale = *sc;
    mode = bilinear ? "bilinear" : "nearest";
    if (bilinear) align = ScriptReader::input(n, 2)->toBool();
  } else {
    return std::nullopt;
  }
  std::vector<int64_t> sizes;
  for (const auto& e : as_list(size)) sizes.push_back(e.toInt());
  std::vector<double> scales;
  for (const auto& e : as_list(scale)) scales.push_back(e.toDouble());
  // UpsampleLeaf checks the mode and size/scale_factor; its ArgumentError makes
  // make_leaf trace through the module.
  return leaf(std::make_shared<UpsampleLeaf>(sizes, scales, mode, align));
}

void save_upsample(const UpsampleLeaf& m, ModuleConfig& c) {
  c.insert("size", m.sizes());
  c.insert("scale_factor", m.scales());
  c.insert("mode", m.mode());
  c.insert("align_corners", m.align_corners() ? IValue(*m.align_corners()) : IValue());
}

std::shared_ptr<UpsampleLeaf> load_upsample(const IValue& c) {
  IValue a = config_at(c, "align_corners");
  return std::make_shared<UpsampleLeaf>(config_at(c, "size").toIntVector(), config_at(c, "scale_factor").toDoubleVector(),
                                        config_at(c, "mode").toStringRef(),
                                        a.isNone() ? c10::optional<bool>() : c10::optional<bool>(a.toBool()));
}

}  // namespace

void register_vision_leaves(LeafRegistry& r) {
  r.add(leaf_record<UpsampleLeaf>("Upsample", save_upsample, load_upsample).traced(trace_upsample));
}

}  // namespace qfx::fx::detail
