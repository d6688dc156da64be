// Serializers of the torch.nn leaves the tracers create (see serialize.h): each
// saves its module's options and rebuilds the module from them.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include <mutex>
#include <typeinfo>

#include "leaf_modules.h"
#include "qfx/fx/serialize.h"
#include "qfx/fx/torch_compat.h"
#include "qfx/error.h"

namespace qfx::fx::detail {
namespace {

using c10::IValue;

template <size_t D>
std::vector<int64_t> vec(const torch::ExpandingArray<D>& a) {
  return std::vector<int64_t>(a->begin(), a->end());
}

template <size_t D>
torch::ExpandingArray<D> arr(const IValue& v) {
  auto x = v.toIntVector();
  if (x.size() != D) throw IoError("expected " + std::to_string(D) + " values, got " + std::to_string(x.size()));
  return torch::ExpandingArray<D>(c10::IntArrayRef(x));
}

/// Registers a serializer for exactly the class `Impl` (typeid match: a
/// subclass needs its own serializer).
template <typename Impl>
void reg(const std::string& type, std::function<void(const Impl&, ModuleConfig&)> save,
         std::function<std::shared_ptr<Impl>(const IValue&)> load) {
  ModuleSerializer s;
  s.type = type;
  s.matches = [](const torch::nn::Module& m) { return typeid(m) == typeid(Impl); };
  s.save = [save](const torch::nn::Module& m) {
    ModuleConfig c = make_config();
    save(dynamic_cast<const Impl&>(m), c);
    return IValue(c);
  };
  s.load = [load](const IValue& c) {
    std::shared_ptr<Impl> impl = load(c);
    return LoadedModule{impl, tensor_call_fn(impl)};
  };
  add_serializer(std::move(s));
}

template <typename Impl>
void reg_plain(const std::string& type) {
  reg<Impl>(type, [](const Impl&, ModuleConfig&) {}, [](const IValue&) { return std::make_shared<Impl>(); });
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
  c.insert("kernel_size", vec<D>(o.kernel_size()));
  c.insert("stride", vec<D>(o.stride()));
  if (auto* p = compat::get_if<torch::ExpandingArray<D>>(&o.padding())) c.insert("padding", vec<D>(*p));
  else if (compat::get_if<torch::enumtype::kSame>(&o.padding())) c.insert("padding", std::string("same"));
  else c.insert("padding", std::string("valid"));
  c.insert("output_padding", vec<D>(o.output_padding()));
  c.insert("dilation", vec<D>(o.dilation()));
  c.insert("groups", o.groups());
  c.insert("bias", o.bias());
  c.insert("padding_mode", std::string(padding_mode_name(o.padding_mode())));
}

template <size_t D, typename Options>
Options conv_options(const IValue& c) {
  Options o(config_at(c, "in_channels").toInt(), config_at(c, "out_channels").toInt(),
            arr<D>(config_at(c, "kernel_size")));
  o.stride(arr<D>(config_at(c, "stride"))).dilation(arr<D>(config_at(c, "dilation")))
      .groups(config_at(c, "groups").toInt()).bias(config_at(c, "bias").toBool())
      .padding_mode(parse_padding_mode(config_at(c, "padding_mode").toStringRef()));
  return o;
}

template <size_t D, typename Holder, typename Options>
void reg_conv(const std::string& type) {
  using Impl = typename Holder::Impl;
  reg<Impl>(type, save_conv<D, Impl>, [](const IValue& c) {
    Options o = conv_options<D, Options>(c);
    IValue p = config_at(c, "padding");
    if (p.isString()) {
      if (p.toStringRef() == "same") o.padding(torch::kSame);
      else o.padding(torch::kValid);
    } else {
      o.padding(arr<D>(p));
    }
    return Holder(o).ptr();
  });
}

template <typename Holder>
void reg_bn(const std::string& type) {
  using Impl = typename Holder::Impl;
  reg<Impl>(
      type,
      [](const Impl& m, ModuleConfig& c) {
        const auto& o = m.options;
        c.insert("num_features", o.num_features());
        c.insert("eps", o.eps());
        c.insert("momentum", o.momentum() ? IValue(*o.momentum()) : IValue());
        c.insert("affine", o.affine());
        c.insert("track_running_stats", o.track_running_stats());
      },
      [](const IValue& c) {
        torch::nn::BatchNormOptions o(config_at(c, "num_features").toInt());
        o.eps(config_at(c, "eps").toDouble()).affine(config_at(c, "affine").toBool())
            .track_running_stats(config_at(c, "track_running_stats").toBool());
        IValue mo = config_at(c, "momentum");
        if (mo.isNone()) o.momentum(c10::nullopt); else o.momentum(mo.toDouble());
        return Holder(o).ptr();
      });
}

void register_all() {
  reg_conv<1, torch::nn::Conv1d, torch::nn::Conv1dOptions>("torch.nn.Conv1d");
  reg_conv<2, torch::nn::Conv2d, torch::nn::Conv2dOptions>("torch.nn.Conv2d");
  reg_conv<3, torch::nn::Conv3d, torch::nn::Conv3dOptions>("torch.nn.Conv3d");
  reg<torch::nn::ConvTranspose2dImpl>("torch.nn.ConvTranspose2d", save_conv<2, torch::nn::ConvTranspose2dImpl>,
                                      [](const IValue& c) {
                                        auto o = conv_options<2, torch::nn::ConvTranspose2dOptions>(c);
                                        o.padding(arr<2>(config_at(c, "padding")))
                                            .output_padding(arr<2>(config_at(c, "output_padding")));
                                        return torch::nn::ConvTranspose2d(o).ptr();
                                      });
  reg<torch::nn::LinearImpl>(
      "torch.nn.Linear",
      [](const torch::nn::LinearImpl& m, ModuleConfig& c) {
        c.insert("in_features", m.options.in_features());
        c.insert("out_features", m.options.out_features());
        c.insert("bias", m.options.bias());
      },
      [](const IValue& c) {
        return torch::nn::Linear(torch::nn::LinearOptions(config_at(c, "in_features").toInt(),
                                                          config_at(c, "out_features").toInt())
                                     .bias(config_at(c, "bias").toBool()))
            .ptr();
      });
  reg_bn<torch::nn::BatchNorm1d>("torch.nn.BatchNorm1d");
  reg_bn<torch::nn::BatchNorm2d>("torch.nn.BatchNorm2d");
  reg_bn<torch::nn::BatchNorm3d>("torch.nn.BatchNorm3d");
  reg<torch::nn::LayerNormImpl>(
      "torch.nn.LayerNorm",
      [](const torch::nn::LayerNormImpl& m, ModuleConfig& c) {
        c.insert("normalized_shape", m.options.normalized_shape());
        c.insert("eps", m.options.eps());
        c.insert("elementwise_affine", m.options.elementwise_affine());
      },
      [](const IValue& c) {
        return torch::nn::LayerNorm(torch::nn::LayerNormOptions(config_at(c, "normalized_shape").toIntVector())
                                        .eps(config_at(c, "eps").toDouble())
                                        .elementwise_affine(config_at(c, "elementwise_affine").toBool()))
            .ptr();
      });
  reg_plain<torch::nn::ReLUImpl>("torch.nn.ReLU");
  reg_plain<torch::nn::ReLU6Impl>("torch.nn.ReLU6");
  reg_plain<torch::nn::SigmoidImpl>("torch.nn.Sigmoid");
  reg_plain<torch::nn::TanhImpl>("torch.nn.Tanh");
  reg_plain<torch::nn::SiLUImpl>("torch.nn.SiLU");
  reg_plain<torch::nn::IdentityImpl>("torch.nn.Identity");
  reg_plain<HardswishLeaf>("torch.nn.Hardswish");
  reg_plain<HardsigmoidLeaf>("torch.nn.Hardsigmoid");
  reg<torch::nn::LeakyReLUImpl>(
      "torch.nn.LeakyReLU",
      [](const torch::nn::LeakyReLUImpl& m, ModuleConfig& c) { c.insert("negative_slope", m.options.negative_slope()); },
      [](const IValue& c) {
        return torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(config_at(c, "negative_slope").toDouble())).ptr();
      });
  reg<torch::nn::GELUImpl>(
      "torch.nn.GELU",
      [](const torch::nn::GELUImpl& m, ModuleConfig& c) { c.insert("approximate", m.options.approximate()); },
      [](const IValue& c) {
        return torch::nn::GELU(torch::nn::GELUOptions().approximate(config_at(c, "approximate").toStringRef())).ptr();
      });
  reg<torch::nn::SoftmaxImpl>(
      "torch.nn.Softmax", [](const torch::nn::SoftmaxImpl& m, ModuleConfig& c) { c.insert("dim", m.options.dim()); },
      [](const IValue& c) { return torch::nn::Softmax(torch::nn::SoftmaxOptions(config_at(c, "dim").toInt())).ptr(); });
  reg<torch::nn::DropoutImpl>(
      "torch.nn.Dropout", [](const torch::nn::DropoutImpl& m, ModuleConfig& c) { c.insert("p", m.options.p()); },
      [](const IValue& c) { return torch::nn::Dropout(torch::nn::DropoutOptions(config_at(c, "p").toDouble())).ptr(); });
  reg<torch::nn::FlattenImpl>(
      "torch.nn.Flatten",
      [](const torch::nn::FlattenImpl& m, ModuleConfig& c) {
        c.insert("start_dim", m.options.start_dim());
        c.insert("end_dim", m.options.end_dim());
      },
      [](const IValue& c) {
        return torch::nn::Flatten(torch::nn::FlattenOptions()
                                      .start_dim(config_at(c, "start_dim").toInt())
                                      .end_dim(config_at(c, "end_dim").toInt()))
            .ptr();
      });
  reg<torch::nn::MaxPool2dImpl>(
      "torch.nn.MaxPool2d",
      [](const torch::nn::MaxPool2dImpl& m, ModuleConfig& c) {
        const auto& o = m.options;
        c.insert("kernel_size", vec<2>(o.kernel_size()));
        c.insert("stride", vec<2>(o.stride()));
        c.insert("padding", vec<2>(o.padding()));
        c.insert("dilation", vec<2>(o.dilation()));
        c.insert("ceil_mode", o.ceil_mode());
      },
      [](const IValue& c) {
        torch::nn::MaxPool2dOptions o(arr<2>(config_at(c, "kernel_size")));
        o.stride(arr<2>(config_at(c, "stride"))).padding(arr<2>(config_at(c, "padding")))
            .dilation(arr<2>(config_at(c, "dilation"))).ceil_mode(config_at(c, "ceil_mode").toBool());
        return torch::nn::MaxPool2d(o).ptr();
      });
  reg<torch::nn::AvgPool2dImpl>(
      "torch.nn.AvgPool2d",
      [](const torch::nn::AvgPool2dImpl& m, ModuleConfig& c) {
        const auto& o = m.options;
        c.insert("kernel_size", vec<2>(o.kernel_size()));
        c.insert("stride", vec<2>(o.stride()));
        c.insert("padding", vec<2>(o.padding()));
        c.insert("ceil_mode", o.ceil_mode());
        c.insert("count_include_pad", o.count_include_pad());
        c.insert("divisor_override", o.divisor_override() ? IValue(*o.divisor_override()) : IValue());
      },
      [](const IValue& c) {
        torch::nn::AvgPool2dOptions o(arr<2>(config_at(c, "kernel_size")));
        o.stride(arr<2>(config_at(c, "stride"))).padding(arr<2>(config_at(c, "padding")))
            .ceil_mode(config_at(c, "ceil_mode").toBool()).count_include_pad(config_at(c, "count_include_pad").toBool());
        IValue d = config_at(c, "divisor_override");
        if (!d.isNone()) o.divisor_override(d.toInt());
        return torch::nn::AvgPool2d(o).ptr();
      });
  reg<torch::nn::AdaptiveAvgPool2dImpl>(
      "torch.nn.AdaptiveAvgPool2d",
      [](const torch::nn::AdaptiveAvgPool2dImpl& m, ModuleConfig& c) {
        c10::impl::GenericList sizes(c10::OptionalType::create(c10::IntType::get()));
        for (const auto& s : *m.options.output_size()) sizes.push_back(s ? IValue(*s) : IValue());
        c.insert("output_size", IValue(sizes));
      },
      [](const IValue& c) {
        std::vector<c10::optional<int64_t>> out;
        for (const auto& e : config_at(c, "output_size").toListRef())
          out.push_back(e.isNone() ? c10::optional<int64_t>() : c10::optional<int64_t>(e.toInt()));
        if (out.size() != 2) throw IoError("output_size needs 2 entries");
        return torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({out[0], out[1]})).ptr();
      });
  reg<UpsampleLeaf>(
      "torch.nn.Upsample",
      [](const UpsampleLeaf& m, ModuleConfig& c) {
        c.insert("size", m.sizes());
        c.insert("scale_factor", m.scales());
        c.insert("mode", m.mode());
        c.insert("align_corners", m.align_corners() ? IValue(*m.align_corners()) : IValue());
      },
      [](const IValue& c) {
        IValue a = config_at(c, "align_corners");
        return std::make_shared<UpsampleLeaf>(config_at(c, "size").toIntVector(),
                                              config_at(c, "scale_factor").toDoubleVector(),
                                              config_at(c, "mode").toStringRef(),
                                              a.isNone() ? c10::optional<bool>() : c10::optional<bool>(a.toBool()));
      });
}

}  // namespace

void register_leaf_serializers() { register_all(); }

}  // namespace qfx::fx::detail
