// The executor: takes a plan for the inputs' shapes from the pool (or builds one),
// runs the kernels in order, hands computed values to taps and watch callbacks,
// and returns the outputs. Thread-safe: concurrent runs use different plans.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "model_impl.h"
#include "qfx/error.h"

namespace qfx::runtime {

const Tensor* Model::constant(const std::string& name) const {
  auto it = impl_->value_id.find(name);
  if (it != impl_->value_id.end()) return impl_->const_of[static_cast<size_t>(it->second)];
  auto c = impl_->g.initializers.find(name);  // an initializer no node reads
  return c == impl_->g.initializers.end() ? nullptr : &c->second;
}

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& inputs) const {
  return run_impl(inputs, nullptr, nullptr);
}

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& inputs, const std::vector<std::string>& watch,
                                         const ValueCallback& on_value) const {
  return run(inputs, watch, on_value, WatchLayout::kLoaded);
}

namespace {

// The named values marked `mark` by value id (0 elsewhere), for `verb` ("watch",
// "replace"): DataError naming a value the model does not compute (a constant, an
// unknown name, or a graph input unless `inputs_too`).
std::vector<char> mark_values(const std::map<std::string, int>& value_id, const std::vector<const Tensor*>& const_of,
                              const std::vector<int>& input_ids, const std::vector<std::string>& names, const std::string& verb,
                              bool inputs_too, char mark) {
  std::vector<char> marked(const_of.size(), 0);
  for (const auto& n : names) {
    auto it = value_id.find(n);
    const bool input = it != value_id.end() && std::find(input_ids.begin(), input_ids.end(), it->second) != input_ids.end();
    if (it == value_id.end() || const_of[static_cast<size_t>(it->second)] || (input && !inputs_too))
      throw DataError("cannot " + verb + " '" + n + "': no such tensor computed by the model" + (inputs_too ? "" : "'s nodes"));
    marked[static_cast<size_t>(it->second)] = mark;
  }
  return marked;
}

}  // namespace

// `watched` by value id: 0 not watched, else 1 + the WatchLayout.
std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& inputs, const std::vector<std::string>& watch,
                                         const ValueCallback& on_value, WatchLayout layout) const {
  const Impl& im = *impl_;
  const std::vector<char> watched =
      mark_values(im.value_id, im.const_of, im.input_ids, watch, "watch", true, static_cast<char>(1 + static_cast<int>(layout)));
  return run_impl(inputs, &watched, &on_value);
}

std::map<std::string, Tensor> Model::run_replacing(const std::map<std::string, Tensor>& inputs, const std::vector<std::string>& replace,
                                                   const ValueReplacer& replacer, const std::vector<std::string>& watch,
                                                   const ValueCallback& on_value) const {
  const Impl& im = *impl_;
  const char plain = static_cast<char>(1 + static_cast<int>(WatchLayout::kPlain));
  const std::vector<char> replaced = mark_values(im.value_id, im.const_of, im.input_ids, replace, "replace", false, plain);
  const std::vector<char> watched = mark_values(im.value_id, im.const_of, im.input_ids, watch, "watch", true, plain);
  return run_impl(inputs, &watched, &on_value, &replaced, &replacer);
}

Model::Impl::Feed Model::Impl::check_inputs(const std::map<std::string, Tensor>& given) const {
  for (const auto& kv : given) {
    bool known = false;
    for (const auto& in : inputs) known |= in.name == kv.first;
    if (!known) {
      std::string names;
      for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
      throw DataError("unknown input '" + kv.first + "' (the model's inputs: " + names + ")");
    }
  }
  Feed f;
  for (const auto& in : inputs) {
    auto it = given.find(in.name);
    if (it == given.end()) throw DataError("missing input '" + in.name + "' " + shape_str(in.shape));
    const Tensor& t = it->second;
    if (t.dtype() != in.dtype)
      throw DataError("input '" + in.name + "' has dtype " + dtype_name(t.dtype()) + ", the model expects " + dtype_name(in.dtype));
    bool fits = in.shape.empty() || t.shape().size() == in.shape.size();
    for (size_t d = 0; fits && d < in.shape.size(); ++d) fits = in.shape[d] < 0 || in.shape[d] == t.shape()[d];
    if (!fits)
      throw DataError("input '" + in.name + "' has shape " + shape_str(t.shape()) + ", the model expects " + shape_str(in.shape));
    f.signature += shape_str(t.shape());
    f.shapes.push_back(t.shape());
    f.tensors.push_back(&t);
  }
  return f;
}

void Model::Impl::run_kernels(Plan& plan, const std::function<void(int, const Tensor&, bool)>& observe) const {
  static const bool print_profile = std::getenv("QFX_PROFILE") != nullptr;
  const bool collect = profiling.load(std::memory_order_relaxed);
  const bool timed = print_profile || collect;
  std::vector<double> node_ms(collect ? plan.kernels.size() : 0, 0.0);
  for (size_t n = 0; n < plan.kernels.size(); ++n) {
    if (!plan.kernels[n].run) {  // evaluated when the plan was built: observed as computed then
      for (int v : node_out[n])
        if (v >= 0) observe(v, plan.values[static_cast<size_t>(v)], plan.meta[static_cast<size_t>(v)].nhwc);
      continue;
    }
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    plan.kernels[n].run(plan.in_ptrs[n], plan.out_ptrs[n]);
    if (timed) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (collect) node_ms[n] = ms;
      if (print_profile)
        std::fprintf(stderr, "[profile] %-20s %-10s %-40s %8.3f ms\n", g.nodes[n].op.c_str(), plan.kernels[n].impl.c_str(),
                     g.nodes[n].name.c_str(), ms);
    }
    for (int v : node_out[n])
      if (v >= 0) observe(v, plan.values[static_cast<size_t>(v)], plan.meta[static_cast<size_t>(v)].nhwc);
  }
  if (collect) add_profile(plan, node_ms);
}

void Model::Impl::add_profile(const Plan& plan, const std::vector<double>& node_ms) const {
  std::lock_guard<std::mutex> lk(mu);
  if (profile_ms.size() != node_ms.size()) {
    profile_ms.assign(node_ms.size(), 0.0);
    profile_impl.assign(node_ms.size(), "");
  }
  for (size_t n = 0; n < node_ms.size(); ++n) {
    profile_ms[n] += node_ms[n];
    if (plan.kernels[n].run) profile_impl[n] = plan.kernels[n].impl;
  }
  ++profile_runs;
}

// Hands a computed value to the replacer in the plain layout and stores what it
// leaves back in the value's own layout.
void replace_value(const std::string& name, Tensor& stored, bool nhwc, const Model::ValueReplacer& replacer) {
  if (!nhwc) {
    replacer(name, stored);
    return;
  }
  Tensor plain(stored.shape(), stored.dtype());
  nhwc_to_nchw(stored.raw(), plain.raw(), stored.shape(), dtype_size(stored.dtype()));
  replacer(name, plain);
  nchw_to_nhwc(plain.raw(), stored.raw(), stored.shape(), dtype_size(stored.dtype()));
}

std::map<std::string, Tensor> Model::run_impl(const std::map<std::string, Tensor>& inputs, const std::vector<char>* watched,
                                              const ValueCallback* on_value, const std::vector<char>* replaced,
                                              const ValueReplacer* replacer) const {
  Impl& im = *impl_;
  const Impl::Feed feed = im.check_inputs(inputs);
  std::unique_ptr<Plan> plan = im.take_plan(feed.signature);
  if (!plan) {
    plan = im.build(feed.shapes);
    if (im.load_choices.empty()) {  // planned at the first run (dynamic height / width)
      std::lock_guard<std::mutex> lk(im.mu);
      if (im.first_run_choices.empty()) im.first_run_choices = plan->choices;
    }
  }
  const std::shared_ptr<const Impl::TapConfig> taps = im.current_taps();
  std::vector<char> replace_now;  // replaced values this plan computes at run time
  if (replaced) {
    replace_now = *replaced;
    for (size_t n = 0; n < plan->kernels.size(); ++n)
      if (!plan->kernels[n].run)
        for (int v : im.node_out[n])
          if (v >= 0) replace_now[static_cast<size_t>(v)] = 0;
    for (size_t v = 0; v < replace_now.size(); ++v)
      if (replace_now[v] && !plan->device.empty() && plan->device[v])
        throw DataError("cannot replace '" + im.value_name[v] + "': it is kept in the " + im.backend_name + " device's memory");
  }
  // Observation of one computed value: the taps' statistics and the caller's watch
  // callback, which sees the logical (plain) layout.
  auto observe = [&](int v, const Tensor& stored, bool nhwc) {
    const size_t vi = static_cast<size_t>(v);
    if (!replace_now.empty() && replace_now[vi]) replace_value(im.value_name[vi], plan->values[vi], nhwc, *replacer);
    if (!taps->stat[vi] && (!watched || !(*watched)[vi])) return;
    Tensor on_host;  // a device-resident value, copied for its observers
    if (!plan->device.empty() && plan->device[vi]) {
      on_host = Tensor(stored.shape(), stored.dtype());
      plan->device_to_host(on_host.raw(), stored.raw(), stored.nbytes());
    }
    const Tensor& t = on_host.defined() ? on_host : stored;
    if (taps->stat[vi]) im.tap(*taps, v, t, nhwc);
    if (!watched || !(*watched)[vi]) return;
    const auto layout = static_cast<WatchLayout>((*watched)[vi] - 1);
    const bool as_stored = layout == WatchLayout::kAsStored || (layout == WatchLayout::kLoaded && im.watch_as_stored[vi]);
    if (nhwc && !as_stored) {
      Tensor plain(t.shape(), t.dtype());
      nhwc_to_nchw(t.raw(), plain.raw(), t.shape(), dtype_size(t.dtype()));
      (*on_value)(im.value_name[vi], plain);
    } else {
      (*on_value)(im.value_name[vi], t);
    }
  };
  for (size_t i = 0; i < im.input_ids.size(); ++i) {
    plan->values[static_cast<size_t>(im.input_ids[i])] = *feed.tensors[i];
    observe(im.input_ids[i], *feed.tensors[i], false);
  }
  im.run_kernels(*plan, observe);
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < im.output_ids.size(); ++i) out[im.outputs[i].name] = plan->values[static_cast<size_t>(im.output_ids[i])].clone();
  for (size_t i = 0; i < im.input_ids.size(); ++i) plan->values[static_cast<size_t>(im.input_ids[i])] = Tensor();
  im.return_plan(feed.signature, std::move(plan));
  return out;
}

std::unique_ptr<Plan> Model::Impl::take_plan(const std::string& sig) const {
  std::lock_guard<std::mutex> lk(mu);
  auto it = pool.find(sig);
  if (it == pool.end() || it->second.free.empty()) return nullptr;
  it->second.last_used = ++tick;
  std::unique_ptr<Plan> plan = std::move(it->second.free.back());
  it->second.free.pop_back();
  return plan;
}

void Model::Impl::return_plan(const std::string& sig, std::unique_ptr<Plan> plan) const {
  std::vector<std::unique_ptr<Plan>> evicted;  // freed outside the lock
  std::lock_guard<std::mutex> lk(mu);
  PoolEntry& e = pool[sig];
  e.free.push_back(std::move(plan));
  e.last_used = ++tick;
  while (pool.size() > max_signatures) {
    auto lru = pool.end();
    for (auto it = pool.begin(); it != pool.end(); ++it)
      if (it->first != sig && (lru == pool.end() || it->second.last_used < lru->second.last_used)) lru = it;
    if (lru == pool.end()) break;
    for (auto& p : lru->second.free) evicted.push_back(std::move(p));
    pool.erase(lru);
  }
}

void Model::set_profiling(bool on) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (on) {
    impl_->profile_ms.clear();
    impl_->profile_impl.clear();
    impl_->profile_runs = 0;
  }
  impl_->profiling.store(on);
}

std::vector<NodeTime> Model::profile(int64_t* runs) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  std::vector<NodeTime> out;
  for (size_t n = 0; n < impl_->profile_ms.size() && n < impl_->g.nodes.size(); ++n)
    if (!impl_->profile_impl[n].empty())
      out.push_back({impl_->g.nodes[n].name, impl_->g.nodes[n].op, impl_->profile_impl[n], impl_->profile_ms[n]});
  if (runs) *runs = impl_->profile_runs;
  return out;
}

}  // namespace qfx::runtime
