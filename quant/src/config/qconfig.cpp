#include "qfx/quant/qconfig.h"

#include <re2/re2.h>

#include <algorithm>
#include <stdexcept>

#include "qfx/runtime/model.h"

#include "qfx/error.h"
#include "sections/sections.h"
#include "yaml_util.h"

namespace qfx::quant {

ObserverSpec resolve_tensor_qconfig(const TensorQConfig& req, const BackendConfig& backend, bool is_weight,
                                    bool qat, const std::string& node) {
  const TensorConstraints& c = is_weight ? backend.weight : backend.activation;
  const std::string what = std::string(is_weight ? "weight" : "activation") + " of node '" + node + "'";
  auto fail = [&](const std::string& why) {
    throw ConfigError("qconfig for the " + what + " cannot run on backend '" + backend.name + "': " + why);
  };
  const QDType dtype = req.dtype.value_or(c.dtypes.front());
  if (std::find(c.dtypes.begin(), c.dtypes.end(), dtype) == c.dtypes.end()) {
    std::string allowed;
    for (auto d : c.dtypes) allowed += std::string(allowed.empty() ? "" : ", ") + qdtype_name(d);
    fail(std::string("dtype ") + qdtype_name(dtype) + " is not supported (backend allows " + allowed + ")");
  }
  const QScheme scheme = req.qscheme.value_or(c.qschemes.front());
  if (std::find(c.qschemes.begin(), c.qschemes.end(), scheme) == c.qschemes.end())
    fail(std::string(qscheme_name(scheme)) + " quantization is not supported (backend requires " +
         qscheme_name(c.qschemes.front()) + ")");
  const bool pc = req.per_channel.value_or(is_weight && c.per_channel_default);
  if (pc && !req.block_size && !c.per_channel_allowed) fail("per-channel quantization is not supported (backend requires per-tensor)");
  if (!pc && !c.per_tensor_allowed) fail("per-tensor quantization is not supported (backend requires per-channel)");
  const bool s16 = dtype == QDType::kInt16;
  const int bits = s16 ? req.bits.value_or(16)
                       : req.bits.value_or(c.default_bits == 0 ? runtime::native_int8_weight_bits() : c.default_bits);
  if (s16 && bits != 16) fail("s16 activations are 16-bit, not " + std::to_string(bits) + "-bit");
  if (!s16 && (bits < c.min_bits || bits > c.max_bits))
    fail(std::to_string(bits) + "-bit quantization is outside the backend's " + std::to_string(c.min_bits) + ".." +
         std::to_string(c.max_bits) + " bits");
  ObserverSpec s;
  try {
    s.spec = QuantSpec::make(dtype, scheme, bits, req.narrow_range.value_or(false));
  } catch (const ConfigError& e) {
    fail(e.what());
  }
  s.spec.per_channel = pc;
  s.spec.ch_axis = pc ? c.ch_axis : 0;
  if (req.block_size) {
    if (!is_weight) fail("per_block granularity is for weights");
    if (!c.per_block_allowed) fail("block-wise weights are not supported (the target's granularity lists no per_block)");
    if (!c.block_sizes.empty() && std::find(c.block_sizes.begin(), c.block_sizes.end(), *req.block_size) == c.block_sizes.end())
      fail("block size " + std::to_string(*req.block_size) + " is not one the target takes");
    s.spec.block_size = *req.block_size;
  }
  s.spec.power_of_two = backend.power_of_two_scale;
  s.spec.scale_min = backend.scale_min;
  s.spec.scale_max = backend.scale_max;
  ObserverKind kind;
  if (req.observer) {
    kind = *req.observer;
  } else if (is_weight) {
    kind = qat ? ObserverKind::kMovingAverageMinMax : ObserverKind::kMinMax;
  } else {
    kind = qat ? ObserverKind::kMovingAverageMinMax : ObserverKind::kHistogram;
  }
  // per_channel picks the per-channel form of a min/max observer.
  if (pc) {
    if (kind == ObserverKind::kMinMax) kind = ObserverKind::kPerChannelMinMax;
    else if (kind == ObserverKind::kMovingAverageMinMax) kind = ObserverKind::kMovingAveragePerChannelMinMax;
    else if (kind == ObserverKind::kHistogram) fail("the histogram observer is per-tensor; use minmax for per-channel");
  } else {
    if (kind == ObserverKind::kPerChannelMinMax || kind == ObserverKind::kMovingAveragePerChannelMinMax)
      fail(std::string("observer '") + observer_kind_name(kind) + "' needs per_channel: true");
  }
  s.kind = kind;
  if (kind == ObserverKind::kHistogram) {
    s.algorithm = req.algorithm.value_or(Algorithm::kMSE);
  } else {
    if (req.algorithm && *req.algorithm != Algorithm::kMinMax)
      fail(std::string("algorithm '") + algorithm_name(*req.algorithm) + "' needs observer: histogram (got " +
           observer_kind_name(kind) + ")");
    s.algorithm = Algorithm::kMinMax;
  }
  if (req.percentile) s.options.percentile = *req.percentile;
  if (req.averaging_constant) s.averaging_constant = *req.averaging_constant;
  if (req.bins) s.bins = *req.bins;
  return s;
}

QConfigMapping& QConfigMapping::set_global(QConfigPtr q) {
  global_ = std::move(q);
  return *this;
}
QConfigMapping& QConfigMapping::set_object_type(const std::string& type, QConfigPtr q) {
  object_type_.emplace_back(type, std::move(q));
  return *this;
}
struct QConfigMapping::CompiledRegex {
  explicit CompiledRegex(const std::string& pattern) : re(pattern, options()) {}
  static RE2::Options options() {
    RE2::Options o;
    o.set_log_errors(false);
    o.set_max_mem(8 << 20);  // bytes for the compiled automata: a pattern that needs more does not compile
    return o;
  }
  RE2 re;
};

QConfigMapping& QConfigMapping::set_module_name_regex(const std::string& regex, QConfigPtr q) {
  auto c = std::make_shared<const CompiledRegex>(regex);
  if (!c->re.ok()) throw ArgumentError("bad regular expression '" + regex + "': " + c->re.error());
  regex_.emplace_back(std::move(c), q);
  regex_src_.emplace_back(regex, std::move(q));
  return *this;
}
QConfigMapping& QConfigMapping::set_module_name(const std::string& name, QConfigPtr q) {
  module_name_.emplace_back(name, std::move(q));
  return *this;
}

std::vector<std::string> QConfigMapping::unmatched(const std::vector<std::string>& module_paths) const {
  std::vector<std::string> out;
  for (const auto& [name, q] : module_name_) {
    bool hit = false;
    for (const auto& p : module_paths) hit = hit || p == name || p.rfind(name + ".", 0) == 0;
    if (!hit) out.push_back("module_name '" + name + "'");
  }
  for (size_t i = 0; i < regex_.size(); ++i) {
    bool hit = false;
    for (const auto& p : module_paths) hit = hit || (!p.empty() && RE2::FullMatch(p, regex_[i].first->re));
    if (!hit) out.push_back("module_name_regex '" + regex_src_[i].first + "'");
  }
  return out;
}

QConfigPtr QConfigMapping::resolve(const std::string& module_path, const std::string& type,
                                   std::string* matched_by) const {
  // Exact module name, then each parent ("a.b.c", "a.b", "a").
  std::string p = module_path;
  while (!p.empty()) {
    for (auto it = module_name_.rbegin(); it != module_name_.rend(); ++it) {
      if (it->first == p) {
        if (matched_by) *matched_by = "module_name:" + p;
        return it->second;
      }
    }
    const auto dot = p.rfind('.');
    p = dot == std::string::npos ? std::string() : p.substr(0, dot);
  }
  for (size_t i = 0; i < regex_.size(); ++i) {
    if (!module_path.empty() && RE2::FullMatch(module_path, regex_[i].first->re)) {
      if (matched_by) *matched_by = "module_name_regex:" + regex_src_[i].first;
      return regex_[i].second;
    }
  }
  for (auto it = object_type_.rbegin(); it != object_type_.rend(); ++it) {
    if (it->first == type) {
      if (matched_by) *matched_by = "module_type:" + type;
      return it->second;
    }
  }
  if (matched_by) *matched_by = "global";
  return global_;
}

QConfigMapping QConfigMapping::default_mapping() { return QConfigMapping(); }

const KeyTable& tensor_qconfig_keys() {
  static const KeyTable t{"qconfig activation / weight", {
      {"observer", KeyType::kChoice, {"minmax", "moving_average_minmax", "histogram"}, {}, "histogram (activations), minmax (weights)", "the statistics kept"},
      {"algorithm", KeyType::kChoice, {"minmax", "percentile", "entropy", "kl", "mse", "auto"}, {}, "mse", "histogram observers: how the range is chosen"},
      {"dtype", KeyType::kChoice, {"u8", "s8", "s16", "float"}, {}, "the backend's first", "the integer type (activations: float for weight-only quantization)"},
      {"qscheme", KeyType::kChoice, {"affine", "symmetric"}, {}, "the backend's first", "zero point free or 0"},
      {"granularity", KeyType::kChoice, {"per_tensor", "per_channel", "per_block"}, {}, "per_tensor (activations)", "one scale, one per output channel, or one per block of input channels (linear weights)"},
      {"block_size", KeyType::kInt, {}, {8, 4096, false, false, "must be between 8 and 4096"}, "none", "per_block: input channels per scale"},
      {"bits", KeyType::kInt, {}, {}, "8", "2..8 (16 for s16): the quant range inside the container"},
      {"narrow_range", KeyType::kBool, {}, {}, "false", "drop the most negative value"},
      {"percentile", KeyType::kNumber, {}, {50, 100, false, false, "must be between 50 and 100"}, "99.99", "algorithm percentile"},
      {"averaging_constant", KeyType::kNumber, {}, {0, 1, true, false, "must be in (0, 1]"}, "0.01", "moving-average observers"},
      {"bins", KeyType::kInt, {}, {16, 1 << 20, false, false, "must be between 16 and 1048576"}, "2048", "histogram bins"},
      {"learnable", KeyType::kBool, {}, {}, "false", "LSQ scale in QAT"},
  }};
  return t;
}

namespace {

using namespace yaml;

// The keys of one qconfig (qconfig.global, each module entry).
const KeyTable& qconfig_spec_keys() {
  static const KeyTable t{"a qconfig", {
      {"activation", KeyType::kMapping, {}, {}, "{}", "activations' quantization", &tensor_qconfig_keys()},
      {"weight", KeyType::kMapping, {}, {}, "{}", "weights' quantization", &tensor_qconfig_keys()},
  }};
  return t;
}

TensorQConfig read_tensor_qconfig(const std::string& path, const YAML::Node& n, const std::string& what) {
  TensorQConfig t;
  if (!n || n.IsNull()) return t;
  const SectionReader s(path, n, what, tensor_qconfig_keys());
  auto choice = [&](const char* key) {
    std::string v;
    s.read(key, &v);
    return v;
  };
  if (s["observer"]) t.observer = parse_observer_kind(choice("observer"));
  if (s["algorithm"]) t.algorithm = parse_algorithm(choice("algorithm"));
  if (s["dtype"]) {
    const std::string d = choice("dtype");
    if (d == "float") t.keep_float = true;
    else t.dtype = parse_qdtype(d);
  }
  if (s["qscheme"]) t.qscheme = choice("qscheme") == "affine" ? QScheme::kAffine : QScheme::kSymmetric;
  const std::string gran = s["granularity"] ? choice("granularity") : "";
  if (!gran.empty()) t.per_channel = gran != "per_tensor";
  if (s["block_size"]) s.read("block_size", &t.block_size.emplace());
  if (gran == "per_block" && !t.block_size) bad(path, n["granularity"], what + ": granularity per_block needs block_size");
  if (t.block_size && gran != "per_block") bad(path, n["block_size"], what + ".block_size needs granularity: per_block");
  if (auto b = s["bits"]) {
    int64_t bits = 0;
    s.read("bits", &bits);
    const bool s16 = t.dtype && *t.dtype == QDType::kInt16;
    if (s16 && bits != 16) bad(path, b, what + ".bits: s16 is 16-bit");
    if (!s16 && (bits < 2 || bits > 8)) bad(path, b, what + ".bits must be between 2 and 8");
    t.bits = static_cast<int>(bits);
  }
  if (s["narrow_range"]) s.read("narrow_range", &t.narrow_range.emplace());
  if (s["percentile"]) s.read("percentile", &t.percentile.emplace());
  if (s["averaging_constant"]) s.read("averaging_constant", &t.averaging_constant.emplace());
  if (s["bins"]) s.read("bins", &t.bins.emplace());
  s.read("learnable", &t.learnable);
  if (t.keep_float && n.size() > 1) bad(path, n["dtype"], what + ": dtype float takes no other keys (the tensor stays float)");
  if (t.algorithm && *t.algorithm != Algorithm::kMinMax && t.observer && *t.observer != ObserverKind::kHistogram)
    bad(path, n["algorithm"], what + ".algorithm '" + algorithm_name(*t.algorithm) + "' needs observer: histogram");
  return t;
}

QConfigPtr read_qconfig(const std::string& path, const YAML::Node& n, const std::string& what) {
  if (n.IsNull()) return nullptr;  // keep float
  const SectionReader s(path, n, what, qconfig_spec_keys());
  auto q = std::make_shared<QConfig>();
  q->activation = read_tensor_qconfig(path, s["activation"], what + ".activation");
  q->weight = read_tensor_qconfig(path, s["weight"], what + ".weight");
  if (q->weight.keep_float) bad(path, n["weight"], what + ".weight: dtype float is for activations (a null qconfig keeps the whole op float)");
  if (q->activation.block_size) bad(path, n["activation"], what + ".activation: per_block granularity is for weights");
  return q;
}

}  // namespace

const KeyTable& sections::qconfig_keys() {
  static const KeyTable t{"qconfig", {
      {"global", KeyType::kMapping, {}, {}, "the backend's", "every module's qconfig", &qconfig_spec_keys()},
      {"module_type", KeyType::kMapping, {}, {}, "{}", "by module class, or op name for functions (null: float)"},
      {"module_name_regex", KeyType::kMapping, {}, {}, "{}", "by module path pattern (RE2)"},
      {"module_name", KeyType::kMapping, {}, {}, "{}", "by module path"},
  }};
  return t;
}

QConfigMapping QConfigMapping::load(const std::string& path) { return qconfig_mapping_from_yaml(path, load_file(path)); }

QConfigMapping qconfig_mapping_from_yaml(const std::string& path, const YAML::Node& root) {
  QConfigMapping m;
  if (!root.IsMap() || !root["qconfig"]) return m;
  const YAML::Node q = root["qconfig"];
  if (q.IsNull()) return m;
  const SectionReader sec(path, q, "qconfig", sections::qconfig_keys());
  if (auto g = sec["global"]) m.set_global(read_qconfig(path, g, "qconfig.global"));
  auto each = [&](const char* key, auto&& set) {
    const YAML::Node sec = q[key];
    if (!sec) return;
    if (!sec.IsMap()) bad(path, sec, std::string("qconfig.") + key + " must be a mapping");
    for (const auto& kv : sec) {
      const std::string k = yaml::key_name(path, kv.first, std::string("qconfig.") + key);
      set(k, read_qconfig(path, kv.second, std::string("qconfig.") + key + "." + k), kv.first);
    }
  };
  each("module_type", [&](const std::string& k, QConfigPtr c, const YAML::Node&) { m.set_object_type(k, c); });
  each("module_name_regex", [&](const std::string& k, QConfigPtr c, const YAML::Node& at) {
    try {
      m.set_module_name_regex(k, c);
    } catch (const ArgumentError& e) {
      bad(path, at, e.what());
    }
  });
  each("module_name", [&](const std::string& k, QConfigPtr c, const YAML::Node&) { m.set_module_name(k, c); });
  return m;
}

}  // namespace qfx::quant
