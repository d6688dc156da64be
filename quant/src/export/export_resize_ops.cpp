// The op catalog's upsample: nn.Upsample and F.interpolate
// (aten::upsample_nearest2d / upsample_bilinear2d / upsample_bicubic2d, .vec or not)
// as ONNX Resize on [N, C, H, W], computing PyTorch's sampling positions:
//   nearest:          src = floor(dst * in / out)      -> asymmetric, nearest_mode floor
//   bilinear, bicubic: src = (dst + 0.5) * in / out - 0.5 -> pytorch_half_pixel
//   align_corners:    src = dst * (in - 1) / (out - 1)   -> align_corners
// Bicubic is Resize's cubic mode with PyTorch's coefficient (cubic_coeff_a -0.75) and
// the taps outside the image replaced by its edge (exclude_outside 0), as PyTorch reads them.
// A scale factor becomes Resize's scales; an output size becomes its sizes, built
// from the input's own N and C (Shape, Slice) and the static H and W, so the batch
// stays dynamic and no float rounding of out / in can lose a row.
#include "export_shape.h"
#include "op_families.h"
#include "qfx/fx/upsample.h"

namespace qfx::quant::detail {
namespace {

// An optional int-list or float-list argument: empty when absent or None.
template <typename T>
std::vector<T> list_or_empty(const fx::Argument* a) {
  if (!a || !a->is_const() || a->value.isNone()) return {};
  const c10::IValue& v = a->value;
  std::vector<T> out;
  if (v.isIntList())
    for (int64_t x : v.toIntVector()) out.push_back(static_cast<T>(x));
  else if (v.isDoubleList())
    for (double x : v.toDoubleVector()) out.push_back(static_cast<T>(x));
  else if (v.isInt())
    out.push_back(static_cast<T>(v.toInt()));
  else if (v.isDouble())
    out.push_back(static_cast<T>(v.toDouble()));
  return out;
}

// `mode`: "nearest", "linear" or "cubic".
void resize(Exporter& ex, fx::Node* n, const std::string& mode, std::vector<int64_t> sizes, std::vector<double> scales,
            bool align_corners) {
  const bool linear = mode != "nearest";
  const auto& d = dims_of(ex, *n, n->args().at(0));
  if (d.size() != 4) unsupported(*n, "interpolation of a tensor of rank " + std::to_string(d.size()) + " (the runtime resizes [N, C, H, W])");
  if (sizes.size() == 1) sizes.assign(2, sizes[0]);
  if (scales.size() == 1) scales.assign(2, scales[0]);
  if (sizes.size() != 2 && scales.size() != 2) unsupported(*n, "interpolation needs an output size or a scale factor per spatial dim");
  const std::string x = ex.value(*n, n->args().at(0)), b = n->name();
  std::vector<std::string> in = {x, ""};
  if (sizes.size() == 2) {
    const std::string shape = ex.fresh(b + "_shape"), nc = ex.fresh(b + "_nc"), full = ex.fresh(b + "_sizes");
    ex.node("Shape", {x}, shape, shape);
    slice_axis(ex, shape, 0, 2, 0, 1, nc, nc);
    ex.attr_i(ex.node("Concat", {nc, ex.ints_init(b + "_hw", sizes)}, full, full), "axis", 0);
    in.push_back("");
    in.push_back(full);
  } else {
    for (double s : scales)
      if (!(s > 0)) unsupported(*n, "a scale factor that is not positive");
    in.push_back(ex.init(b + "_scales", at::tensor({1.0f, 1.0f, static_cast<float>(scales[0]), static_cast<float>(scales[1])}, at::kFloat)));
  }
  const std::string y = ex.fresh(b);
  ex.last_ = ex.node("Resize", in, y, b);
  auto* m = ex.last_->add_attribute();
  m->set_name("mode");
  m->set_type(onnx::AttributeProto::STRING);
  m->set_s(mode);
  if (mode == "cubic") {
    auto* a = ex.last_->add_attribute();
    a->set_name("cubic_coeff_a");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(-0.75f);
  }
  auto* c = ex.last_->add_attribute();
  c->set_name("coordinate_transformation_mode");
  c->set_type(onnx::AttributeProto::STRING);
  c->set_s(!linear ? "asymmetric" : align_corners ? "align_corners" : "pytorch_half_pixel");
  if (!linear) {
    auto* nm = ex.last_->add_attribute();
    nm->set_name("nearest_mode");
    nm->set_type(onnx::AttributeProto::STRING);
    nm->set_s("floor");
  }
  ex.names_[n] = y;
  ex.rank_[n] = 4;
}

void upsample_function(Exporter& ex, fx::Node* n) {
  const std::string& t = n->target();
  const std::string mode = t.find("bilinear") != std::string::npos  ? "linear"
                           : t.find("bicubic") != std::string::npos ? "cubic"
                           : t.find("nearest") != std::string::npos ? "nearest"
                                                                    : "";
  const bool linear = !mode.empty() && mode != "nearest", vec = t.size() > 4 && t.compare(t.size() - 4, 4, ".vec") == 0;
  if (mode.empty()) unsupported(*n, "interpolation mode of " + t + " (nearest, bilinear or bicubic)");
  auto arg = [&](size_t i, const char* name) -> const fx::Argument* {
    for (const auto& kv : n->kwargs())
      if (kv.first == name) return &kv.second;
    return i < n->args().size() ? &n->args()[i] : nullptr;
  };
  // .vec: (input, output_size?, [align_corners,] scale_factors?); otherwise
  // (input, output_size, [align_corners,] scales_h?, scales_w?): the output size decides.
  const size_t after = linear ? 3 : 2;
  const bool align = linear && ex.num_arg(*n, 2, 0) != 0;
  const std::vector<int64_t> sizes = list_or_empty<int64_t>(arg(1, "output_size"));
  const std::vector<double> scales = vec ? list_or_empty<double>(arg(after, "scale_factors")) : std::vector<double>{};
  resize(ex, n, mode, sizes, sizes.empty() ? scales : std::vector<double>{}, align);
}

void upsample_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  const auto* u = dynamic_cast<const fx::UpsampleLeaf*>(&m);
  if (!u) unsupported(n, "module 'upsample' has no ONNX export in qfx yet");
  const std::string mode = u->mode() == "bilinear" ? "linear" : u->mode() == "bicubic" ? "cubic" : u->mode();
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    unsupported(n, "Upsample mode '" + u->mode() + "' (nearest, bilinear or bicubic)");
  resize(e, &n, mode, u->sizes(), u->scales(), u->align_corners().value_or(false));
}

}  // namespace

void register_resize_ops(OpCatalog& c) {
  c.add(OpRecord("upsample").also_aten({"upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d"}).also_modules({"Upsample"})
            .quantized_as(activation_kinds()).describe("nearest, bilinear or bicubic interpolation (ONNX Resize)")
            .writes({"Resize", "Shape", "Slice", "Concat"})
            .reads_kwargs({"output_size", "scale_factors", "align_corners"})
            .to_onnx([](Exporter& e, fx::Node& n) { upsample_function(e, &n); }, upsample_module));
}

}  // namespace qfx::quant::detail
