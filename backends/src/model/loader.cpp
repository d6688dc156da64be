// The loader: ONNX -> runtime graph (Constant/Identity folded, QDQ groups matched
// into int8 ops, float activations fused), value ids, checks that every input is
// produced, and the first plan at the declared shapes, so that unsupported ops and
// bad shapes fail at load.
#include <atomic>
#include <algorithm>
#include <set>

#include "../matmul_nbits.h"
#include "model_impl.h"
#include "qfx/runtime/op_schema.h"
#include "qfx/error.h"

namespace qfx::runtime {

namespace {
// Loads the plug-ins and checks the backend is registered (ConfigError naming the
// registered ones otherwise).
void check_backend(const ModelOptions& options) {
  for (const auto& p : options.plugins) load_plugin(p);
  backend_info(options.backend);
}
}  // namespace

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + (s[i] < 0 ? std::string("?") : std::to_string(s[i]));
  return o + "]";
}

int Model::Impl::id(const std::string& name) {
  auto it = value_id.find(name);
  if (it != value_id.end()) return it->second;
  const int i = static_cast<int>(value_name.size());
  value_id[name] = i;
  value_name.push_back(name);
  auto c = g.initializers.find(name);
  const_of.push_back(c == g.initializers.end() ? nullptr : &c->second);
  return i;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {
std::atomic<int64_t> g_loads{0};
std::atomic<int64_t> g_parses{0};

// A copy of `g` with storage of its own: loading changes its graph (folding,
// QDQ matching, packing), never the parsed one it came from.
ir::Graph deep_copy(const ir::Graph& g) {
  ir::Graph c = g;
  for (auto& kv : c.initializers) kv.second = kv.second.clone();
  for (auto& n : c.nodes)
    for (auto& kv : n.attrs)
      if (kv.second.kind == ir::Attr::Kind::kTensor) kv.second.t = kv.second.t.clone();
  return c;
}
}  // namespace

int64_t Model::load_count() { return g_loads.load(); }
int64_t Model::parse_count() { return g_parses.load(); }

Model Model::load(const std::string& path, const ModelOptions& options) {
  ++g_loads;
  ++g_parses;
  check_backend(options);
  return from_graph(ir::load_onnx(path), options, path);
}

Model Model::load_from_string(const std::string& bytes, const ModelOptions& options, const std::string& what) {
  ++g_loads;
  ++g_parses;
  check_backend(options);
  return from_graph(ir::load_onnx_bytes(bytes, what), options, what);
}

ParsedModel Model::parse(const std::string& path) {
  ++g_parses;
  ParsedModel p;
  p.graph_ = std::make_shared<const ir::Graph>(ir::load_onnx(path));
  p.path_ = path;
  return p;
}

ParsedModel Model::parse_from_string(const std::string& bytes, const std::string& what) {
  ++g_parses;
  ParsedModel p;
  p.graph_ = std::make_shared<const ir::Graph>(ir::load_onnx_bytes(bytes, what));
  p.path_ = what;
  return p;
}

Model Model::load(const ParsedModel& parsed, const ModelOptions& options) {
  ++g_loads;
  if (!parsed.graph_) throw ArgumentError("Model::load: the ParsedModel holds no graph (default-constructed)");
  check_backend(options);
  return from_graph(deep_copy(*parsed.graph_), options, parsed.path_);
}

void Model::Impl::index_values(const std::string& path) {
  for (const auto& in : g.inputs) {
    input_ids.push_back(id(in.name));
    inputs.push_back({in.name, in.dtype, in.shape});
  }
  for (const auto& n : g.nodes) {
    std::vector<int> in, out;
    for (const auto& i : n.inputs) in.push_back(i.empty() ? -1 : id(i));
    for (const auto& o : n.outputs) out.push_back(o.empty() ? -1 : id(o));
    node_in.push_back(in);
    node_out.push_back(out);
    const OpSchema* schema = find_op_schema(n.op);
    if (schema && schema->integer) ++int8_ops;
  }
  // Every input must be a graph input, an initializer or an earlier output.
  std::set<int> defined(input_ids.begin(), input_ids.end());
  for (size_t v = 0; v < const_of.size(); ++v)
    if (const_of[v]) defined.insert(static_cast<int>(v));
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int v : node_in[n])
      if (v >= 0 && !defined.count(v))
        throw DataError(path + ": " + g.nodes[n].label() + " reads '" + value_name[static_cast<size_t>(v)] +
                        "', which nothing produces before it");
    for (int v : node_out[n])
      if (v >= 0) defined.insert(v);
  }
  for (const auto& o : g.outputs) {
    auto it = value_id.find(o.name);
    if (it == value_id.end() || !defined.count(it->second)) throw DataError(path + ": graph output '" + o.name + "' is never produced");
    output_ids.push_back(it->second);
    outputs.push_back({o.name, o.dtype, o.shape});
  }
}

void Model::Impl::plan_at_load() {
  // Plan once now (dynamic dims as 1): unsupported ops and bad shapes fail at load.
  // A model with dynamic dims beyond the batch (height, width, sequence length)
  // may need more than 1 there (a 3x3 window without padding): when that plan
  // finds a shape that does not fit, planning waits for the real shapes of the
  // first run.
  std::vector<std::vector<int64_t>> shapes;
  std::string sig;
  bool dynamic_inner = false;
  for (const auto& in : inputs) {
    std::vector<int64_t> s = in.shape;
    for (size_t d = 0; d < s.size(); ++d) {
      dynamic_inner = dynamic_inner || (d > 0 && s[d] < 0);
      s[d] = s[d] < 0 ? 1 : s[d];
    }
    sig += shape_str(s);
    shapes.push_back(s);
  }
  std::unique_ptr<Plan> plan;
  try {
    plan = build(shapes);
  } catch (const DataError&) {
    if (!dynamic_inner) throw;
    return;
  }
  load_choices = plan->choices;
  return_plan(sig, std::move(plan));
}

Model Model::from_graph(ir::Graph graph, const ModelOptions& options, const std::string& path) {
  auto im = std::make_unique<Impl>();
  im->backend_name = options.backend;
  if (options.plan_cache_size < 1) throw ConfigError("ModelOptions::plan_cache_size must be at least 1");
  im->max_signatures = options.plan_cache_size;
  im->max_plan_bytes = options.max_plan_bytes;
  for (const auto& b : backend_chain(options.backend)) {
    const auto ops = backend_info(b).nhwc_ops;
    im->nhwc_ops.insert(ops.begin(), ops.end());
  }
  im->g = std::move(graph);
  ir::simplify(im->g);
  if (options.arithmetic) {
    options.arithmetic->validate("ModelOptions::arithmetic");
    im->g.arithmetic = *options.arithmetic;
  }
  if (options.fuse_qdq) im->fallbacks = ir::fuse_qdq(im->g);
  for (auto& n : im->g.nodes) n.arithmetic = im->g.arithmetic;
  im->keep.insert(options.keep_values.begin(), options.keep_values.end());
  im->keep_any_layout = options.keep_values_any_layout;
  if (options.fuse_qdq) ir::fuse_blocked_matmuls(im->g, im->keep);
  if (options.fuse_activations) ir::fuse_float_activations(im->g, im->keep);
  im->index_values(path);
  im->watch_as_stored.assign(im->value_name.size(), 0);
  if (im->keep_any_layout)
    for (const auto& k : im->keep)
      if (auto it = im->value_id.find(k); it != im->value_id.end()) im->watch_as_stored[static_cast<size_t>(it->second)] = 1;
  auto taps = std::make_shared<Model::Impl::TapConfig>();
  taps->stat.resize(im->value_name.size());
  im->taps_cfg = std::move(taps);
  im->plan_at_load();
  return Model(std::move(im));
}

const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }
const std::vector<std::string>& Model::float_fallbacks() const { return impl_->fallbacks; }
int Model::int8_ops() const { return impl_->int8_ops; }
int Model::total_ops() const { return static_cast<int>(impl_->g.nodes.size()); }
const std::string& Model::backend() const { return impl_->backend_name; }

std::vector<KernelChoice> Model::kernel_report() const {
  if (!impl_->load_choices.empty()) return impl_->load_choices;
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->first_run_choices;
}

std::vector<std::string> Model::cached_plans() const {
  std::vector<std::pair<uint64_t, std::string>> by_use;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    for (const auto& kv : impl_->pool) by_use.emplace_back(kv.second.last_used, kv.first);
  }
  std::sort(by_use.rbegin(), by_use.rend());
  std::vector<std::string> out;
  for (auto& u : by_use) out.push_back(std::move(u.second));
  return out;
}

std::map<std::string, int> Model::kernel_impls() const { return kernel_counts(kernel_report()); }

std::vector<std::string> Model::value_names() const {
  std::vector<std::string> out;
  for (size_t n = 0; n < impl_->g.nodes.size(); ++n)
    for (int v : impl_->node_out[n])
      if (v >= 0) out.push_back(impl_->value_name[static_cast<size_t>(v)]);
  return out;
}

}  // namespace qfx::runtime
