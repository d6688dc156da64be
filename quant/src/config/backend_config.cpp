#include "qfx/quant/backend_config.h"
#include "qfx/quant/mixed_precision.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "qfx/quant/op_catalog.h"
#include "qfx/runtime/registry.h"
#include "yaml_util.h"

namespace qfx::quant {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kWeighted: return "weighted";
    case OpKind::kQuantized: return "quantized";
    case OpKind::kShare: return "share";
    case OpKind::kFixed: return "fixed";
    case OpKind::kFloat: return "float";
  }
  return "?";
}

const std::vector<std::string>& known_op_names() {
  static const std::vector<std::string> names = op_catalog().configurable_names();
  return names;
}

OpConfig BackendConfig::op(const std::string& name) const {
  auto it = ops.find(name);
  return it == ops.end() ? OpConfig{} : it->second;
}

bool BackendConfig::has_fusion(const std::vector<std::string>& pattern) const {
  return std::find(fusions.begin(), fusions.end(), pattern) != fusions.end();
}

namespace {

using namespace yaml;

bool known_op(const std::string& n) {
  const auto& k = known_op_names();
  return std::find(k.begin(), k.end(), n) != k.end();
}

std::string list_str(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return s;
}

TensorConstraints read_tensor(const std::string& path, const YAML::Node& n, const std::string& what, bool weight) {
  TensorConstraints t;
  check_keys(path, n, what, {"dtypes", "qschemes", "granularity", "ch_axis", "min_bits", "max_bits", "default_bits", "block_sizes"});
  auto dt = n["dtypes"];
  if (!dt) bad(path, n, what + ".dtypes is required");
  for (const auto& s : as_string_list(path, dt, what + ".dtypes")) {
    if (s == "s16" && weight) bad(path, dt, what + ".dtypes: weights are 8-bit (s16 is for activations of 16x8 layers)");
    if (s != "u8" && s != "s8" && s != "s16") bad(path, dt, what + ".dtypes: '" + s + "' is not u8, s8 or s16");
    t.dtypes.push_back(parse_qdtype(s));
  }
  if (t.dtypes.empty()) bad(path, dt, what + ".dtypes must not be empty");
  if (t.dtypes.front() == QDType::kInt16)
    bad(path, dt, what + ".dtypes: list an 8-bit dtype first (the default); s16 is chosen per layer in the qconfig "
                         "or by ptq.auto_fallback");
  if (auto q = n["qschemes"]) {
    for (const auto& s : as_string_list(path, q, what + ".qschemes")) {
      if (s == "affine") t.qschemes.push_back(QScheme::kAffine);
      else if (s == "symmetric") t.qschemes.push_back(QScheme::kSymmetric);
      else bad(path, q, what + ".qschemes: '" + s + "' is not affine or symmetric");
    }
    if (t.qschemes.empty()) bad(path, q, what + ".qschemes must not be empty");
  } else {
    t.qschemes = {weight ? QScheme::kSymmetric : QScheme::kAffine};
  }
  if (auto g = n["granularity"]) {
    if (!weight) bad(path, g, "granularity applies to weights only");
    t.per_tensor_allowed = false;
    t.per_block_allowed = false;
    bool first = true;
    for (const auto& s : as_string_list(path, g, what + ".granularity")) {
      if (s == "per_channel") t.per_channel_allowed = true;
      else if (s == "per_tensor") t.per_tensor_allowed = true;
      else if (s == "per_block" && !first) t.per_block_allowed = true;
      else if (s == "per_block") bad(path, g, what + ".granularity: list per_channel or per_tensor first (the default)");
      else bad(path, g, what + ".granularity: '" + s + "' is not per_channel, per_tensor or per_block");
      if (first) t.per_channel_default = s == "per_channel";
      first = false;
    }
    if (first) bad(path, g, what + ".granularity must not be empty");
  }
  if (auto a = n["ch_axis"]) {
    // Per-channel weights are quantized along their output channels, as ONNX's
    // per-axis QuantizeLinear for Conv / Gemm expects (axis 0; a ConvTranspose
    // weight's axis 1 is chosen from the op). No other axis can be honoured.
    t.ch_axis = as_int(path, a, what + ".ch_axis");
    if (t.ch_axis != 0)
      bad(path, a, what + ".ch_axis " + std::to_string(t.ch_axis) +
                       " cannot be honoured: weights are quantized per output channel (axis 0 of conv and linear weights, "
                       "axis 1 of transposed conv weights, chosen by op); use 0 or leave ch_axis out");
  }
  if (auto bs = n["block_sizes"]) {
    if (!bs.IsSequence() || bs.size() == 0) bad(path, bs, what + ".block_sizes must be a non-empty list of integers");
    for (const auto& v : bs) {
      const int64_t b = as_int(path, v, what + ".block_sizes");
      if (b < 8 || b > 4096) bad(path, v, what + ".block_sizes: " + std::to_string(b) + " is not between 8 and 4096");
      t.block_sizes.push_back(b);
    }
  }
  if (auto b = n["min_bits"]) {
    t.min_bits = static_cast<int>(as_int(path, b, what + ".min_bits"));
    if (t.min_bits < 2 || t.min_bits > 8) bad(path, b, what + ".min_bits must be between 2 and 8");
  }
  if (auto b = n["max_bits"]) {
    t.max_bits = static_cast<int>(as_int(path, b, what + ".max_bits"));
    if (t.max_bits < t.min_bits || t.max_bits > 8) bad(path, b, what + ".max_bits must be between min_bits and 8");
  }
  if (auto b = n["default_bits"]) {
    if (b.IsScalar() && b.Scalar() == "native") {
      t.default_bits = 0;
    } else {
      t.default_bits = static_cast<int>(as_int(path, b, what + ".default_bits"));
      if (t.default_bits < t.min_bits || t.default_bits > t.max_bits)
        bad(path, b, what + ".default_bits must be 'native' or between min_bits and max_bits");
    }
  }
  return t;
}

// runtime: NAME, or {backend: NAME, plugins: [lib.so, ...]} (paths relative to the
// file). The plug-ins are loaded now, so the backend they register is known.
void read_runtime(const std::string& path, const YAML::Node& rt, BackendConfig* b) {
  if (rt.IsScalar()) {
    b->runtime = as_string(path, rt, "runtime");
  } else {
    if (!rt.IsMap()) bad(path, rt, "runtime must be a backend name or a mapping {backend, plugins}");
    check_keys(path, rt, "runtime", {"backend", "plugins"});
    if (!rt["backend"]) bad(path, rt, "runtime.backend is required");
    b->runtime = as_string(path, rt["backend"], "runtime.backend");
    if (auto pl = rt["plugins"]) {
      const auto dir = std::filesystem::path(path).parent_path();
      for (const auto& f : as_string_list(path, pl, "runtime.plugins")) {
        const std::string full = std::filesystem::path(f).is_absolute() ? f : (dir / f).string();
        if (!std::filesystem::exists(full)) bad(path, pl, "runtime.plugins: '" + full + "' not found");
        runtime::load_plugin(full);
        b->runtime_plugins.push_back(full);
      }
    }
  }
  try {
    runtime::backend_info(b->runtime);  // names the registered backends when unknown
  } catch (const ConfigError& e) {
    bad(path, rt, std::string("runtime: ") + e.what());
  }
}

// scale: {power_of_two, min, max}.
void read_scale(const std::string& path, const YAML::Node& sc, BackendConfig* bp) {
  BackendConfig& b = *bp;
  check_keys(path, sc, "scale", {"power_of_two", "min", "max"});
  if (auto p = sc["power_of_two"]) b.power_of_two_scale = as_bool(path, p, "scale.power_of_two");
  if (auto mn = sc["min"]) {
    b.scale_min = as_double(path, mn, "scale.min");
    if (!(b.scale_min >= 0)) bad(path, mn, "scale.min must be >= 0");
  }
  if (auto mx = sc["max"]) {
    b.scale_max = as_double(path, mx, "scale.max");
    if (!(b.scale_max > b.scale_min)) bad(path, mx, "scale.max must be greater than scale.min");
  }
}

// fusions: a list of op-name lists, each conv/linear [+ batchnorm] [+ activation] or [add|mul, activation].
void read_fusions(const std::string& path, const YAML::Node& f, BackendConfig* bp) {
  BackendConfig& b = *bp;
  if (!f.IsSequence()) bad(path, f, "fusions must be a list of op-name lists");
  for (const auto& pat : f) {
    auto names = as_string_list(path, pat, "a fusion pattern");
    if (names.size() < 2) bad(path, pat, "a fusion pattern needs at least two ops");
    for (const auto& n : names)
      if (!known_op(n)) bad(path, pat, "unknown op '" + n + "' in fusion pattern (known: " + list_str(known_op_names()) + ")");
    const OpCatalog& cat = op_catalog();
    const bool elementwise = cat.fusion_role(names[0]) == FusionRole::kElementwiseHead;
    if (elementwise && (names.size() != 2 || cat.fusion_role(names[1]) != FusionRole::kActivation))
      bad(path, pat, "an elementwise fusion pattern is [add|mul, relu|relu6]");
    if (!elementwise && cat.fusion_role(names[0]) != FusionRole::kWeightedHead)
      bad(path, pat, "a fusion pattern must start with a conv, linear, add or mul op, not '" + names[0] + "'");
    for (size_t i = 1; i < names.size() && !elementwise; ++i) {
      const auto& n = names[i];
      const bool bn = cat.fusion_role(n) == FusionRole::kBatchNorm, act = cat.fusion_role(n) == FusionRole::kActivation;
      if (!(bn && i == 1) && !(act && i == names.size() - 1))
        bad(path, pat, "fusion patterns are conv/linear [+ batchnorm] [+ relu|relu6]; '" + n + "' cannot be at position " + std::to_string(i + 1));
    }
    b.fusions.push_back(names);
  }
}

// ops: op name -> kind (weighted, quantized, share, float, or {fixed: [lo, hi]}), as the catalog allows.
void read_ops(const std::string& path, const YAML::Node& ops, BackendConfig* bp) {
  BackendConfig& b = *bp;
  if (!ops.IsMap()) bad(path, ops, "ops must be a mapping from op name to kind");
  for (const auto& kv : ops) {
    const std::string name = yaml::key_name(path, kv.first, "ops");
    if (!known_op(name)) bad(path, kv.first, "unknown op '" + name + "' (known: " + list_str(known_op_names()) + ")");
    OpConfig oc;
    const YAML::Node v = kv.second;
    if (v.IsMap()) {
      check_keys(path, v, "ops." + name, {"fixed"});
      const YAML::Node r = v["fixed"];
      if (!r.IsSequence() || r.size() != 2) bad(path, r, "ops." + name + ".fixed must be [lo, hi], the output range");
      oc.kind = OpKind::kFixed;
      oc.fixed_lo = static_cast<float>(as_double(path, r[0], "fixed range"));
      oc.fixed_hi = static_cast<float>(as_double(path, r[1], "fixed range"));
      if (!(oc.fixed_hi > oc.fixed_lo)) bad(path, r, "ops." + name + ".fixed: hi must be greater than lo");
      // The 8-bit scale (hi - lo) / 255 must be a normal float32 (and both ends float32 numbers).
      if (!std::isfinite(oc.fixed_hi - oc.fixed_lo) || (oc.fixed_hi - oc.fixed_lo) / 255.0f < std::numeric_limits<float>::min())
        bad(path, r, "ops." + name + ".fixed: the range must give a float32 scale between 1.2e-38 and 3.4e38");
    } else {
      const std::string k = as_choice(path, v, "op kind of '" + name + "'", {"weighted", "quantized", "share", "float"});
      oc.kind = k == "weighted" ? OpKind::kWeighted
                : k == "quantized" ? OpKind::kQuantized
                : k == "share" ? OpKind::kShare
                               : OpKind::kFloat;
    }
    // The catalog says which categories the op can take (weighted: only ops with weights).
    const auto& kinds = op_catalog().find(name)->kinds;
    if (std::find(kinds.begin(), kinds.end(), oc.kind) == kinds.end()) {
      const bool is_w = std::find(kinds.begin(), kinds.end(), OpKind::kWeighted) != kinds.end();
      bad(path, v, is_w ? "'" + name + "' has weights: use weighted or float"
                        : "'" + name + "' has no weights; use quantized, share, fixed or float");
    }
    b.ops[name] = oc;
  }
}

// mac_cost: {w4a8: 0.5, w8a8: 1, ...}: precision names (ptq.mixed_precision's) to positive costs.
void read_mac_cost(const std::string& path, const YAML::Node& m, BackendConfig* b) {
  if (!m.IsMap()) bad(path, m, "mac_cost must be a mapping of precisions to relative costs: {w8a8: 1, w8a16: 2, float: 4}");
  for (const auto& e : m) {
    const std::string name = as_string(path, e.first, "mac_cost");
    try {
      PrecisionCandidate::parse(name, "mac_cost");
    } catch (const ConfigError& err) {
      bad(path, e.first, err.what());
    }
    const double v = as_double(path, e.second, "mac_cost." + name);
    if (!(v > 0)) bad(path, e.second, "mac_cost." + name + " must be positive");
    b->mac_cost[name] = v;
  }
}

}  // namespace

BackendConfig BackendConfig::load(const std::string& path) {
  YAML::Node root = load_file(path);
  if (!root.IsMap()) throw ConfigError(path + ": a backend file must be a YAML mapping");
  check_keys(path, root, "the backend file",
             {"name", "description", "runtime", "activation", "weight", "bias", "scale", "fusions", "ops", "arithmetic",
              "mac_cost"});
  BackendConfig b;
  b.source = path;
  if (!root["name"]) bad(path, root, "'name' is required");
  b.name = as_string(path, root["name"], "name");
  if (auto d = root["description"]) b.description = as_string(path, d, "description");
  if (auto rt = root["runtime"]) read_runtime(path, rt, &b);
  if (!root["activation"]) bad(path, root, "'activation' is required");
  if (!root["weight"]) bad(path, root, "'weight' is required");
  b.activation = read_tensor(path, root["activation"], "activation", false);
  b.weight = read_tensor(path, root["weight"], "weight", true);
  if (auto bi = root["bias"]) {
    as_choice(path, bi, "bias dtype", {"s32"});
    b.bias_dtype = QDType::kInt32;
  }
  if (auto sc = root["scale"]) read_scale(path, sc, &b);
  if (auto f = root["fusions"]) read_fusions(path, f, &b);
  if (auto ops = root["ops"]) read_ops(path, ops, &b);
  if (auto a = root["arithmetic"]) b.arithmetic = read_arithmetic(path, a, b);
  if (auto m = root["mac_cost"]) read_mac_cost(path, m, &b);
  return b;
}

std::string build_tree_path(const std::string& key) {
  const std::string lib = runtime::runtime_library_dir();
  if (lib.empty()) return "";
  std::ifstream f(std::filesystem::path(lib) / "qfx_build_tree.paths");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

namespace {

// An installed qfx's data folder `sub` ("configs", "fixtures"): <prefix>/<datadir>/qfx/SUB,
// found from the loaded runtime library (<prefix>/<libdir>), wherever the prefix was
// installed or moved to; empty when there is none.
std::string installed_data_dir(const std::string& sub) {
  const std::string lib = runtime::runtime_library_dir();
  if (lib.empty()) return "";
  const std::filesystem::path dir = std::filesystem::path(lib) / QFX_CONFIG_DIR_FROM_LIBDIR / ".." / sub;
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) ? dir.lexically_normal().string() : "";
}

}  // namespace

std::string default_fixture_dir() {
  const std::string tree = build_tree_path("fixtures");
  return tree.empty() ? installed_data_dir("fixtures") : tree;
}

std::vector<std::string> config_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("QFX_CONFIG_DIR")) dirs.emplace_back(env);
  const std::string installed = installed_data_dir("configs");
  if (!installed.empty()) dirs.push_back(installed);
  // A build tree: the source tree's configs, named in a file beside the runtime library.
  const std::string tree = build_tree_path("configs");
  if (!tree.empty()) dirs.push_back(tree);
  return dirs;
}

std::string find_config(const std::string& relative) {
  const auto dirs = config_dirs();
  std::error_code ec;
  for (const auto& d : dirs) {
    const std::filesystem::path p = std::filesystem::path(d) / relative;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  throw ConfigError("qfx's shipped config '" + relative + "' is in none of " + list_str(dirs) +
                    " (set QFX_CONFIG_DIR to the configs folder of an installed qfx)");
}

BackendConfig BackendConfig::resolve(const std::string& name_or_path, const std::vector<std::string>& search_dirs) {
  namespace fs = std::filesystem;
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".yaml");
  if (is_path) return load(name_or_path);
  std::vector<std::string> dirs = search_dirs;
  for (const auto& d : config_dirs()) dirs.push_back(d + "/backends");
  std::vector<std::string> available;
  for (const auto& d : dirs) {
    fs::path p = fs::path(d) / (name_or_path + ".yaml");
    if (fs::exists(p)) return load(p.string());
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".yaml") available.push_back(e.path().stem().string());
  }
  std::sort(available.begin(), available.end());
  available.erase(std::unique(available.begin(), available.end()), available.end());
  throw ConfigError("unknown backend '" + name_or_path + "' (available: " + list_str(available) +
                    "; or give the path of a backend YAML file)");
}

}  // namespace qfx::quant
