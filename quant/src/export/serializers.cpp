// Serializers of qfx_quant's modules for qfx::fx::save_graph_module: observers,
// FakeQuantize, FusedConvLinear (fused / QAT modules), QuantDequant and
// QuantizedConvLinear (converted modules). Registered when this object file is
// linked; quant/CMakeLists.txt makes every program that links qfx_quant link it
// (the `qfx_quant_serializers` symbol below).
#include <stdexcept>

#include "qfx/fx/serialize.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/observer.h"
#include "qfx/quant/quantized_modules.h"
#include "qfx/error.h"

namespace qfx::quant {
namespace {

using c10::IValue;
using fx::config_at;

IValue spec_config(const QuantSpec& s) {
  auto c = fx::make_config();
  c.insert("dtype", std::string(qdtype_name(s.dtype)));
  c.insert("qscheme", std::string(qscheme_name(s.qscheme)));
  c.insert("quant_min", s.quant_min);
  c.insert("quant_max", s.quant_max);
  c.insert("per_channel", s.per_channel);
  c.insert("ch_axis", s.ch_axis);
  c.insert("power_of_two", s.power_of_two);
  c.insert("scale_min", s.scale_min);
  c.insert("scale_max", s.scale_max);
  c.insert("custom_range", s.custom_range);
  return c;
}

QuantSpec spec_from(const IValue& c) {
  QuantSpec s;
  s.dtype = parse_qdtype(config_at(c, "dtype").toStringRef());
  const std::string scheme = config_at(c, "qscheme").toStringRef();
  if (scheme == qscheme_name(QScheme::kAffine)) s.qscheme = QScheme::kAffine;
  else if (scheme == qscheme_name(QScheme::kSymmetric)) s.qscheme = QScheme::kSymmetric;
  else throw IoError("unknown qscheme '" + scheme + "'");
  s.quant_min = config_at(c, "quant_min").toInt();
  s.quant_max = config_at(c, "quant_max").toInt();
  s.per_channel = config_at(c, "per_channel").toBool();
  s.ch_axis = config_at(c, "ch_axis").toInt();
  s.power_of_two = config_at(c, "power_of_two").toBool();
  s.scale_min = config_at(c, "scale_min").toDouble();
  s.scale_max = config_at(c, "scale_max").toDouble();
  s.custom_range = config_at(c, "custom_range").toBool();
  return s;
}

IValue observer_config(const ObserverBase& o) {
  auto c = fx::make_config();
  const std::string cls = o.name();
  c.insert("class", cls);
  c.insert("spec", spec_config(o.spec()));
  c.insert("tensor_name", o.tensor_name());
  if (const auto* h = dynamic_cast<const HistogramObserver*>(&o)) {
    c.insert("algorithm", std::string(algorithm_name(h->configured_algorithm())));
    c.insert("percentile", h->options().percentile);
    c.insert("mse_steps", static_cast<int64_t>(h->options().mse_steps));
    c.insert("entropy_stride", static_cast<int64_t>(h->options().entropy_stride));
    c.insert("bins", h->bins());
  } else if (const auto* f = dynamic_cast<const FixedQParamsObserver*>(&o)) {
    c.insert("lo", static_cast<double>(f->range().first));
    c.insert("hi", static_cast<double>(f->range().second));
  } else if (const auto* m = dynamic_cast<const MinMaxObserver*>(&o)) {
    c.insert("averaging_constant", m->averaging_constant());
  } else if (const auto* p = dynamic_cast<const PerChannelMinMaxObserver*>(&o)) {
    c.insert("averaging_constant", p->averaging_constant());
  } else {
    throw IoError("observer class '" + cls + "' has no serializer");
  }
  return c;
}

std::shared_ptr<ObserverBase> observer_from(const IValue& c) {
  const std::string cls = config_at(c, "class").toStringRef();
  const QuantSpec spec = spec_from(config_at(c, "spec"));
  std::shared_ptr<ObserverBase> o;
  if (cls == "HistogramObserver") {
    AlgorithmOptions opts;
    opts.percentile = config_at(c, "percentile").toDouble();
    opts.mse_steps = static_cast<int>(config_at(c, "mse_steps").toInt());
    opts.entropy_stride = static_cast<int>(config_at(c, "entropy_stride").toInt());
    o = std::make_shared<HistogramObserver>(spec, parse_algorithm(config_at(c, "algorithm").toStringRef()), opts,
                                            config_at(c, "bins").toInt());
  } else if (cls == "FixedQParamsObserver") {
    o = std::make_shared<FixedQParamsObserver>(spec, static_cast<float>(config_at(c, "lo").toDouble()),
                                               static_cast<float>(config_at(c, "hi").toDouble()));
  } else if (cls == "MinMaxObserver") {
    o = std::make_shared<MinMaxObserver>(spec);
  } else if (cls == "MovingAverageMinMaxObserver") {
    o = std::make_shared<MovingAverageMinMaxObserver>(spec, config_at(c, "averaging_constant").toDouble());
  } else if (cls == "PerChannelMinMaxObserver") {
    o = std::make_shared<PerChannelMinMaxObserver>(spec);
  } else if (cls == "MovingAveragePerChannelMinMaxObserver") {
    o = std::make_shared<MovingAveragePerChannelMinMaxObserver>(spec, config_at(c, "averaging_constant").toDouble());
  } else {
    throw IoError("unknown observer class '" + cls + "'");
  }
  o->set_tensor_name(config_at(c, "tensor_name").toStringRef());
  return o;
}

template <typename T>
bool is(const torch::nn::Module& m) {
  return dynamic_cast<const T*>(&m) != nullptr;
}

void register_all() {
  fx::register_module_serializer(
      {"qfx.Observer", is<ObserverBase>,
       [](const torch::nn::Module& m) { return observer_config(dynamic_cast<const ObserverBase&>(m)); },
       [](const IValue& c) {
         auto o = observer_from(c);
         return fx::LoadedModule{o, fx::tensor_call_fn(o)};
       }});
  fx::register_module_serializer(
      {"qfx.FakeQuantize", is<FakeQuantize>,
       [](const torch::nn::Module& m) {
         const auto& fq = dynamic_cast<const FakeQuantize&>(m);
         auto c = fx::make_config();
         c.insert("learnable", fq.learnable());
         c.insert("qparams_stale", fq.qparams_stale());
         if (fq.softmax_dim()) c.insert("softmax_dim", *fq.softmax_dim());
         c.insert("observer", observer_config(fq.observer()));
         return IValue(c);
       },
       [](const IValue& c) {
         auto fq = std::make_shared<FakeQuantize>(observer_from(config_at(c, "observer")),
                                                  config_at(c, "learnable").toBool());
         fq->set_qparams_stale(config_at(c, "qparams_stale").toBool());
         const auto& cd = c.toGenericDict();
         if (cd.contains("softmax_dim")) fq->set_softmax_dim(cd.at("softmax_dim").toInt());
         return fx::LoadedModule{fq, fx::tensor_call_fn(fq)};
       }});
  fx::register_module_serializer(
      {"qfx.FusedConvLinear", is<FusedConvLinear>,
       [](const torch::nn::Module& m) { return dynamic_cast<const FusedConvLinear&>(m).config(); },
       [](const IValue& c) {
         auto f = FusedConvLinear::from_config(c);
         return fx::LoadedModule{f, fused_call_fn(f)};
       }});
  fx::register_module_serializer(
      {"qfx.QuantDequant", is<QuantDequant>,
       [](const torch::nn::Module& m) {
         const auto& qd = dynamic_cast<const QuantDequant&>(m);
         auto c = fx::make_config();
         c.insert("per_channel", qd.qparams().per_channel);
         c.insert("axis", qd.qparams().axis);
         c.insert("quant_min", qd.qparams().quant_min);
         c.insert("quant_max", qd.qparams().quant_max);
         c.insert("dtype", std::string(qdtype_name(qd.qparams().dtype)));
         c.insert("algorithm", qd.algorithm());
         c.insert("observed_min", static_cast<double>(qd.observed_min()));
         c.insert("observed_max", static_cast<double>(qd.observed_max()));
         return IValue(c);
       },
       [](const IValue& c) {
         QParams q;
         q.scale = at::ones({}, at::TensorOptions().dtype(at::kFloat));
         q.zero_point = at::zeros({}, at::TensorOptions().dtype(at::kInt));
         q.per_channel = config_at(c, "per_channel").toBool();
         q.axis = config_at(c, "axis").toInt();
         q.quant_min = config_at(c, "quant_min").toInt();
         q.quant_max = config_at(c, "quant_max").toInt();
         q.dtype = parse_qdtype(config_at(c, "dtype").toStringRef());
         auto qd = std::make_shared<QuantDequant>(q, config_at(c, "algorithm").toStringRef(),
                                                  static_cast<float>(config_at(c, "observed_min").toDouble()),
                                                  static_cast<float>(config_at(c, "observed_max").toDouble()));
         return fx::LoadedModule{qd, quant_dequant_call_fn(qd)};
       }});
  fx::register_module_serializer(
      {"qfx.QuantizedConvLinear", is<QuantizedConvLinear>,
       [](const torch::nn::Module& m) { return dynamic_cast<const QuantizedConvLinear&>(m).config(); },
       [](const IValue& c) {
         auto q = QuantizedConvLinear::from_config(c);
         return fx::LoadedModule{q, quantized_call_fn(q)};
       }});
}

const bool registered = (register_all(), true);

}  // namespace
}  // namespace qfx::quant

/// Referenced by the link option qfx_quant adds (`--undefined=qfx_quant_serializers`),
/// so static links keep this object file and its registrations.
extern "C" int qfx_quant_serializers() { return qfx::quant::registered ? 1 : 0; }
