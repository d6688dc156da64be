#include "qfx/runtime/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <mutex>

#include <omp.h>
#include <set>

#include "ir.h"
#include "kernels.h"
#include "qfx/error.h"

namespace qfx::runtime {

namespace {

constexpr size_t kAlign = 64;

struct Plan {
  std::vector<Kernel> kernels;
  std::vector<Meta> meta;      // by value id (layout of each value)
  std::vector<Tensor> values;  // by value id
  std::shared_ptr<uint8_t[]> arena;
  std::vector<std::vector<const Tensor*>> in_ptrs;
  std::vector<std::vector<Tensor*>> out_ptrs;
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + (s[i] < 0 ? std::string("?") : std::to_string(s[i]));
  return o + "]";
}

}  // namespace

struct Model::Impl {
  ir::Graph g;
  Backend backend = Backend::kOneDNN;
  std::string backend_name;
  std::map<std::string, int> value_id;
  std::vector<std::string> value_name;
  std::vector<const Tensor*> const_of;  // by value id
  std::vector<std::vector<int>> node_in, node_out;
  std::vector<int> input_ids, output_ids;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<std::string> fallbacks;
  std::set<std::string> keep;  // ModelOptions::keep_values: stay plain, so watching them costs no conversion
  int int8_ops = 0;

  mutable std::mutex mu;
  mutable std::map<std::string, std::vector<std::unique_ptr<Plan>>> pool;

  std::vector<int> tap_ids;
  std::vector<bool> tapped;  // by value id
  TapKind tap_kind = TapKind::kMinMax;
  TapOptions tap_opts;
  mutable std::mutex tap_mu;
  mutable std::map<int, TapStats> stats;
  mutable std::vector<uint32_t> tap_scratch;  // [threads * bins] partial histograms

  int id(const std::string& name) {
    auto it = value_id.find(name);
    if (it != value_id.end()) return it->second;
    const int i = static_cast<int>(value_name.size());
    value_id[name] = i;
    value_name.push_back(name);
    auto c = g.initializers.find(name);
    const_of.push_back(c == g.initializers.end() ? nullptr : &c->second);
    return i;
  }

  std::unique_ptr<Plan> build(const std::vector<std::vector<int64_t>>& in_shapes) const {
    auto p = std::make_unique<Plan>();
    const size_t nv = value_name.size();
    std::vector<Meta> meta(nv);
    for (size_t v = 0; v < nv; ++v)
      if (const_of[v]) meta[v] = {const_of[v]->shape(), const_of[v]->dtype()};
    for (size_t i = 0; i < input_ids.size(); ++i) meta[static_cast<size_t>(input_ids[i])] = {in_shapes[i], inputs[i].dtype};
    // Kernels for the concrete shapes. Shape ops and nodes whose inputs are all
    // constant (shape arithmetic exported around Resize, Reshape, ...) are
    // evaluated now, once per plan, and their outputs become plan constants.
    std::vector<Tensor> folded(nv);
    auto const_ptr = [&](int v) -> const Tensor* {
      if (v < 0) return nullptr;
      if (const_of[static_cast<size_t>(v)]) return const_of[static_cast<size_t>(v)];
      return folded[static_cast<size_t>(v)].defined() ? &folded[static_cast<size_t>(v)] : nullptr;
    };
    // Channels last between layers (onednn backend; float and int8): a value may be
    // stored NHWC when it is not a graph output and every consumer is an op whose
    // kernels take that layout. A consumer kernel that turns out not to (a reference fallback)
    // gets a plain copy, so this is only ever a speed decision.
    std::vector<char> nhwc_ok(nv, 0);
    if (backend == Backend::kOneDNN) {
      static const std::set<std::string> takes = {"QConv", "MaxPool", "QAdd", "QMul", "QRelu", "QClip",
                                                  "Conv", "AveragePool", "Add", "Relu", "Clip"};
      std::vector<char> bad(nv, 0), used(nv, 0);
      for (size_t n = 0; n < g.nodes.size(); ++n)
        for (int v : node_in[n])
          if (v >= 0) {
            used[static_cast<size_t>(v)] = 1;
            if (!takes.count(g.nodes[n].op)) bad[static_cast<size_t>(v)] = 1;
          }
      for (int v : output_ids) bad[static_cast<size_t>(v)] = 1;
      for (const auto& k : keep) {
        auto it = value_id.find(k);
        if (it != value_id.end()) bad[static_cast<size_t>(it->second)] = 1;
      }
      for (size_t v = 0; v < nv; ++v) nhwc_ok[v] = used[v] && !bad[v];
    }
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const ir::Node& node = g.nodes[n];
      std::vector<Meta> in;
      std::vector<const Tensor*> consts;
      bool all_const = !node_in[n].empty();
      for (int v : node_in[n]) {
        in.push_back(v < 0 ? Meta{} : meta[static_cast<size_t>(v)]);
        consts.push_back(const_ptr(v));
        if (v >= 0 && !consts.back()) all_const = false;
      }
      if (node.op == "Shape" && !in.empty()) {
        const auto& s = in[0].shape;
        const int64_t r = static_cast<int64_t>(s.size());
        int64_t b = node.attr_i("start", 0), e = node.attr_i("end", r);
        b = std::min(std::max(b < 0 ? b + r : b, int64_t{0}), r);
        e = std::min(std::max(e < 0 ? e + r : e, int64_t{0}), r);
        Tensor t({std::max<int64_t>(e - b, 0)}, DType::kInt64);
        for (int64_t i = b; i < e; ++i) t.data<int64_t>()[i - b] = s[static_cast<size_t>(i)];
        folded[static_cast<size_t>(node_out[n][0])] = t;
        meta[static_cast<size_t>(node_out[n][0])] = {t.shape(), t.dtype()};
        p->kernels.push_back(Kernel{});
        continue;
      }
      const bool out_nhwc = !all_const && node_out[n].size() == 1 && node_out[n][0] >= 0 &&
                            nhwc_ok[static_cast<size_t>(node_out[n][0])];
      Kernel k = make_kernel(node, in, consts, all_const ? Backend::kReference : backend, out_nhwc);
      if (!k.accepts_nhwc) plain_inputs(&k, in);
      if (k.outputs.size() < node_out[n].size())
        throw UnsupportedOpError(node.label() + ": produces fewer outputs than the model uses");
      for (size_t o = 0; o < node_out[n].size(); ++o)
        if (node_out[n][o] >= 0) meta[static_cast<size_t>(node_out[n][o])] = k.outputs[o];
      if (all_const) {
        std::vector<Tensor*> outs;
        for (size_t o = 0; o < node_out[n].size(); ++o) {
          if (node_out[n][o] < 0) {
            outs.push_back(nullptr);
            continue;
          }
          Tensor& t = folded[static_cast<size_t>(node_out[n][o])];
          t = Tensor(k.outputs[o].shape, k.outputs[o].dtype);
          outs.push_back(&t);
        }
        k.run(consts, outs);
        k.run = nullptr;
      }
      p->kernels.push_back(std::move(k));
    }
    // Memory plan: lifetimes, then greedy slot sharing.
    std::vector<int> last_use(nv, -1);
    for (size_t n = 0; n < g.nodes.size(); ++n)
      for (int v : node_in[n])
        if (v >= 0) last_use[static_cast<size_t>(v)] = static_cast<int>(n);
    for (int v : output_ids) last_use[static_cast<size_t>(v)] = static_cast<int>(g.nodes.size());
    struct Slot {
      size_t size = 0;
      bool free = true;
    };
    std::vector<Slot> slots;
    std::vector<int> slot_of(nv, -1);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      for (int v : node_out[n]) {
        if (v < 0 || folded[static_cast<size_t>(v)].defined()) continue;
        const Meta& m = meta[static_cast<size_t>(v)];
        int64_t cnt = 1;
        for (auto d : m.shape) cnt *= d;
        const size_t need = (static_cast<size_t>(cnt) * dtype_size(m.dtype) + kAlign - 1) / kAlign * kAlign;
        int best = -1;
        for (size_t s = 0; s < slots.size(); ++s) {
          if (!slots[s].free) continue;
          if (best < 0 || (slots[s].size >= need && (slots[static_cast<size_t>(best)].size < need ||
                                                     slots[s].size < slots[static_cast<size_t>(best)].size)))
            best = static_cast<int>(s);
        }
        if (best < 0) {
          slots.push_back({});
          best = static_cast<int>(slots.size() - 1);
        }
        slots[static_cast<size_t>(best)].free = false;
        slots[static_cast<size_t>(best)].size = std::max(slots[static_cast<size_t>(best)].size, need);
        slot_of[static_cast<size_t>(v)] = best;
        if (last_use[static_cast<size_t>(v)] < 0) last_use[static_cast<size_t>(v)] = static_cast<int>(n);  // unused output
      }
      for (size_t v = 0; v < nv; ++v)
        if (slot_of[v] >= 0 && last_use[v] == static_cast<int>(n)) slots[static_cast<size_t>(slot_of[v])].free = true;
    }
    std::vector<size_t> offset(slots.size());
    size_t total = 0;
    for (size_t s = 0; s < slots.size(); ++s) {
      offset[s] = total;
      total += slots[s].size;
    }
    p->meta = meta;
    p->arena = std::shared_ptr<uint8_t[]>(new uint8_t[std::max<size_t>(total, kAlign)]);
    p->values.resize(nv);
    for (size_t v = 0; v < nv; ++v) {
      if (const_of[v]) {
        p->values[v] = *const_of[v];
      } else if (folded[v].defined()) {
        p->values[v] = folded[v];
      } else if (slot_of[v] >= 0) {
        std::shared_ptr<uint8_t[]> view(p->arena, p->arena.get() + offset[static_cast<size_t>(slot_of[v])]);
        p->values[v] = Tensor(meta[v].shape, meta[v].dtype, view);
      }
    }
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      std::vector<const Tensor*> in;
      for (int v : node_in[n]) in.push_back(v < 0 ? nullptr : &p->values[static_cast<size_t>(v)]);
      std::vector<Tensor*> out;
      for (int v : node_out[n]) out.push_back(v < 0 ? nullptr : &p->values[static_cast<size_t>(v)]);
      p->in_ptrs.push_back(std::move(in));
      p->out_ptrs.push_back(std::move(out));
    }
    return p;
  }

  // Makes `k` take plain copies of its channels-last inputs (buffers owned by the
  // kernel, allocated now: running still allocates nothing).
  static void plain_inputs(Kernel* k, const std::vector<Meta>& in) {
    std::vector<size_t> which;
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].nhwc) which.push_back(i);
    if (which.empty() || !k->run) return;
    auto bufs = std::make_shared<std::vector<Tensor>>();
    for (size_t i : which) bufs->emplace_back(in[i].shape, in[i].dtype);
    k->run = [inner = std::move(k->run), which, bufs](const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) {
      std::vector<const Tensor*> plain = ins;
      for (size_t j = 0; j < which.size(); ++j) {
        Tensor& b = (*bufs)[j];
        nhwc_to_nchw(ins[which[j]]->raw(), b.raw(), b.shape(), dtype_size(b.dtype()));
        plain[which[j]] = &b;
      }
      inner(plain, outs);
    };
  }

  // Folds one tensor into its statistics: min/max and histogram counts are
  // computed in parallel (OpenMP) into per-thread scratch sized by set_taps, so
  // taps allocate nothing per run.
  void tap(int v, const Tensor& t, bool nhwc = false) const {
    if (t.dtype() != DType::kFloat32) return;
    const float* x = t.data<float>();
    const int64_t n = t.numel();
    if (n == 0) return;
    float lo = x[0], hi = x[0];
#pragma omp parallel for simd reduction(min : lo) reduction(max : hi) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      lo = x[i] < lo ? x[i] : lo;
      hi = x[i] > hi ? x[i] : hi;
    }
    std::lock_guard<std::mutex> lk(tap_mu);
    TapStats& s = stats[v];
    if (s.count == 0) {
      s.min = lo;
      s.max = hi;
    } else {
      s.min = std::min(s.min, lo);
      s.max = std::max(s.max, hi);
    }
    s.count += n;
    if (tap_kind == TapKind::kPerChannelMinMax && t.shape().size() >= 2) {
      const int64_t N = t.shape()[0], C = t.shape()[1], inner = n / (N * C);
      if (s.channel_min.empty()) {
        s.channel_min.assign(static_cast<size_t>(C), INFINITY);
        s.channel_max.assign(static_cast<size_t>(C), -INFINITY);
      }
      float* cmin = s.channel_min.data();
      float* cmax = s.channel_max.data();
      if (nhwc) {  // channels innermost: rows of C values
        for (int64_t r = 0; r < n / C; ++r) {
          const float* p = x + r * C;
          for (int64_t c = 0; c < C; ++c) {
            cmin[c] = p[c] < cmin[c] ? p[c] : cmin[c];
            cmax[c] = p[c] > cmax[c] ? p[c] : cmax[c];
          }
        }
      } else {
#pragma omp parallel for if (n > 65536)
        for (int64_t c = 0; c < C; ++c) {
          float cl = cmin[c], ch = cmax[c];
          for (int64_t b = 0; b < N; ++b) {
            const float* p = x + (b * C + c) * inner;
            for (int64_t i = 0; i < inner; ++i) {
              cl = p[i] < cl ? p[i] : cl;
              ch = p[i] > ch ? p[i] : ch;
            }
          }
          cmin[c] = cl;
          cmax[c] = ch;
        }
      }
    }
    if (tap_kind == TapKind::kHistogram) {
      const int64_t bins = tap_opts.bins;
      if (s.histogram.empty()) s.histogram.assign(static_cast<size_t>(bins), 0.0);
      const float scale = static_cast<float>(bins) / (tap_opts.hi - tap_opts.lo), off = tap_opts.lo;
      const int nthreads = static_cast<int>(tap_scratch.size() / static_cast<size_t>(bins));
      uint32_t* part = tap_scratch.data();
      std::fill(tap_scratch.begin(), tap_scratch.end(), 0u);
#pragma omp parallel num_threads(nthreads) if (n > 65536)
      {
        const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
        uint32_t* h = part + static_cast<int64_t>(tid) * bins;
        const int64_t b0 = n * tid / nt, b1 = n * (tid + 1) / nt;
        for (int64_t i = b0; i < b1; ++i) {
          int64_t b = static_cast<int64_t>((x[i] - off) * scale);
          b = b < 0 ? 0 : (b >= bins ? bins - 1 : b);
          ++h[b];
        }
      }
      double* h = s.histogram.data();
      for (int th = 0; th < nthreads; ++th)
        for (int64_t b = 0; b < bins; ++b) h[b] += part[static_cast<int64_t>(th) * bins + b];
    }
  }

};

namespace {
void check_backend(const ModelOptions& options) {
  if (options.backend != "onednn" && options.backend != "reference")
    throw ConfigError("unknown runtime backend '" + options.backend + "' (expected onednn or reference)");
}
}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string& path, const ModelOptions& options) {
  check_backend(options);
  return from_graph(ir::load_onnx(path), options, path);
}

Model Model::load_from_string(const std::string& bytes, const ModelOptions& options, const std::string& what) {
  check_backend(options);
  return from_graph(ir::load_onnx_bytes(bytes, what), options, what);
}

Model Model::from_graph(ir::Graph graph, const ModelOptions& options, const std::string& path) {
  auto im = std::make_unique<Impl>();
  im->backend = options.backend == "reference" ? Backend::kReference : Backend::kOneDNN;
  im->backend_name = options.backend;
  im->g = std::move(graph);
  ir::simplify(im->g);
  if (options.fuse_qdq) im->fallbacks = ir::fuse_qdq(im->g);
  im->keep.insert(options.keep_values.begin(), options.keep_values.end());
  ir::fuse_float_activations(im->g, im->keep);
  for (const auto& in : im->g.inputs) {
    im->input_ids.push_back(im->id(in.name));
    im->inputs.push_back({in.name, in.dtype, in.shape});
  }
  for (const auto& n : im->g.nodes) {
    std::vector<int> in, out;
    for (const auto& i : n.inputs) in.push_back(i.empty() ? -1 : im->id(i));
    for (const auto& o : n.outputs) out.push_back(o.empty() ? -1 : im->id(o));
    // Every input must be a graph input, an initializer or an earlier output.
    im->node_in.push_back(in);
    im->node_out.push_back(out);
    if (n.op.size() > 1 && n.op[0] == 'Q' && n.op != "QuantizeLinear") ++im->int8_ops;
  }
  std::set<int> defined(im->input_ids.begin(), im->input_ids.end());
  for (size_t v = 0; v < im->const_of.size(); ++v)
    if (im->const_of[v]) defined.insert(static_cast<int>(v));
  for (size_t n = 0; n < im->g.nodes.size(); ++n) {
    for (int v : im->node_in[n])
      if (v >= 0 && !defined.count(v))
        throw DataError(path + ": " + im->g.nodes[n].label() + " reads '" + im->value_name[static_cast<size_t>(v)] +
                        "', which nothing produces before it");
    for (int v : im->node_out[n])
      if (v >= 0) defined.insert(v);
  }
  for (const auto& o : im->g.outputs) {
    auto it = im->value_id.find(o.name);
    if (it == im->value_id.end() || !defined.count(it->second))
      throw DataError(path + ": graph output '" + o.name + "' is never produced");
    im->output_ids.push_back(it->second);
    im->outputs.push_back({o.name, o.dtype, o.shape});
  }
  im->tapped.assign(im->value_name.size(), false);
  // Plan once now (dynamic dims as 1): unsupported ops and bad shapes fail at load.
  std::vector<std::vector<int64_t>> shapes;
  std::string sig;
  for (const auto& in : im->inputs) {
    std::vector<int64_t> s = in.shape;
    for (auto& d : s) d = d < 0 ? 1 : d;
    sig += shape_str(s);
    shapes.push_back(s);
  }
  im->pool[sig].push_back(im->build(shapes));
  return Model(std::move(im));
}

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& inputs) const {
  return run_impl(inputs, nullptr, nullptr);
}

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& inputs, const std::vector<std::string>& watch,
                                         const ValueCallback& on_value) const {
  const Impl& im = *impl_;
  std::vector<char> watched(im.value_name.size(), 0);
  for (const auto& n : watch) {
    auto it = im.value_id.find(n);
    if (it == im.value_id.end() || im.const_of[static_cast<size_t>(it->second)])
      throw DataError("cannot watch '" + n + "': no such tensor computed by the model");
    watched[static_cast<size_t>(it->second)] = 1;
  }
  return run_impl(inputs, &watched, &on_value);
}

std::map<std::string, Tensor> Model::run_impl(const std::map<std::string, Tensor>& inputs, const std::vector<char>* watched,
                                              const ValueCallback* on_value) const {
  Impl& im = *impl_;
  for (const auto& kv : inputs) {
    bool known = false;
    for (const auto& in : im.inputs) known |= in.name == kv.first;
    if (!known) {
      std::string names;
      for (const auto& in : im.inputs) names += (names.empty() ? "" : ", ") + in.name;
      throw DataError("unknown input '" + kv.first + "' (the model's inputs: " + names + ")");
    }
  }
  std::string sig;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<const Tensor*> given;
  for (const auto& in : im.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end()) throw DataError("missing input '" + in.name + "' " + shape_str(in.shape));
    const Tensor& t = it->second;
    if (t.dtype() != in.dtype)
      throw DataError("input '" + in.name + "' has dtype " + dtype_name(t.dtype()) + ", the model expects " +
                      dtype_name(in.dtype));
    if (!in.shape.empty() && t.shape().size() != in.shape.size())
      throw DataError("input '" + in.name + "' has shape " + shape_str(t.shape()) + ", the model expects " +
                      shape_str(in.shape));
    for (size_t d = 0; d < in.shape.size(); ++d)
      if (in.shape[d] >= 0 && in.shape[d] != t.shape()[d])
        throw DataError("input '" + in.name + "' has shape " + shape_str(t.shape()) + ", the model expects " +
                        shape_str(in.shape));
    sig += shape_str(t.shape());
    shapes.push_back(t.shape());
    given.push_back(&t);
  }
  std::unique_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> lk(im.mu);
    auto& free_plans = im.pool[sig];
    if (!free_plans.empty()) {
      plan = std::move(free_plans.back());
      free_plans.pop_back();
    }
  }
  if (!plan) plan = im.build(shapes);
  for (size_t i = 0; i < im.input_ids.size(); ++i) {
    plan->values[static_cast<size_t>(im.input_ids[i])] = *given[i];
    if (im.tapped[static_cast<size_t>(im.input_ids[i])]) im.tap(im.input_ids[i], *given[i]);
    if (watched && (*watched)[static_cast<size_t>(im.input_ids[i])]) (*on_value)(im.inputs[i].name, *given[i]);
  }
  static const bool profile = std::getenv("QFX_PROFILE") != nullptr;
  for (size_t n = 0; n < plan->kernels.size(); ++n) {
    if (!plan->kernels[n].run) continue;  // evaluated when the plan was built
    const auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    plan->kernels[n].run(plan->in_ptrs[n], plan->out_ptrs[n]);
    if (profile)
      std::fprintf(stderr, "[profile] %-20s %-10s %-40s %8.3f ms\n", im.g.nodes[n].op.c_str(), plan->kernels[n].impl,
                   im.g.nodes[n].name.c_str(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    for (int v : im.node_out[n]) {
      if (v >= 0 && im.tapped[static_cast<size_t>(v)])
        im.tap(v, plan->values[static_cast<size_t>(v)], plan->meta[static_cast<size_t>(v)].nhwc);
      if (v >= 0 && watched && (*watched)[static_cast<size_t>(v)]) {
        const Tensor& t = plan->values[static_cast<size_t>(v)];
        if (plan->meta[static_cast<size_t>(v)].nhwc) {  // callbacks see the logical (plain) layout
          Tensor plain(t.shape(), t.dtype());
          nhwc_to_nchw(t.raw(), plain.raw(), t.shape(), dtype_size(t.dtype()));
          (*on_value)(im.value_name[static_cast<size_t>(v)], plain);
        } else {
          (*on_value)(im.value_name[static_cast<size_t>(v)], t);
        }
      }
    }
  }
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < im.output_ids.size(); ++i) out[im.outputs[i].name] = plan->values[static_cast<size_t>(im.output_ids[i])].clone();
  for (size_t i = 0; i < im.input_ids.size(); ++i) plan->values[static_cast<size_t>(im.input_ids[i])] = Tensor();
  {
    std::lock_guard<std::mutex> lk(im.mu);
    im.pool[sig].push_back(std::move(plan));
  }
  return out;
}

const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }
const std::vector<std::string>& Model::float_fallbacks() const { return impl_->fallbacks; }
int Model::int8_ops() const { return impl_->int8_ops; }
int Model::total_ops() const { return static_cast<int>(impl_->g.nodes.size()); }
const std::string& Model::backend() const { return impl_->backend_name; }

std::map<std::string, int> Model::kernel_impls() const {
  std::map<std::string, int> out;
  std::lock_guard<std::mutex> lk(impl_->mu);
  for (const auto& kv : impl_->pool) {
    if (kv.second.empty()) continue;
    const Plan& p = *kv.second.front();
    for (size_t n = 0; n < p.kernels.size(); ++n)
      if (p.kernels[n].run) ++out[impl_->g.nodes[n].op + ":" + p.kernels[n].impl];
    break;
  }
  return out;
}

std::vector<std::string> Model::value_names() const {
  std::vector<std::string> out;
  for (size_t n = 0; n < impl_->g.nodes.size(); ++n)
    for (int v : impl_->node_out[n])
      if (v >= 0) out.push_back(impl_->value_name[static_cast<size_t>(v)]);
  return out;
}

void Model::set_taps(const std::vector<std::string>& names, TapKind kind, TapOptions options) {
  Impl& im = *impl_;
  std::vector<int> ids;
  for (const auto& n : names) {
    auto it = im.value_id.find(n);
    if (it == im.value_id.end() || im.const_of[static_cast<size_t>(it->second)])
      throw DataError("cannot tap '" + n + "': no such tensor computed by the model");
    ids.push_back(it->second);
  }
  if (kind == TapKind::kHistogram && (options.bins < 1 || !(options.hi > options.lo)))
    throw DataError("histogram taps need bins >= 1 and hi > lo");
  std::lock_guard<std::mutex> lk(im.tap_mu);
  im.tapped.assign(im.value_name.size(), false);
  for (int v : ids) im.tapped[static_cast<size_t>(v)] = true;
  im.tap_ids = ids;
  im.tap_kind = kind;
  im.tap_opts = options;
  im.stats.clear();
  im.tap_scratch.assign(kind == TapKind::kHistogram ? static_cast<size_t>(options.bins) * static_cast<size_t>(omp_get_max_threads()) : 0, 0u);
}

std::map<std::string, TapStats> Model::taps() const {
  std::lock_guard<std::mutex> lk(impl_->tap_mu);
  std::map<std::string, TapStats> out;
  for (const auto& kv : impl_->stats) out[impl_->value_name[static_cast<size_t>(kv.first)]] = kv.second;
  return out;
}

void Model::reset_taps() {
  std::lock_guard<std::mutex> lk(impl_->tap_mu);
  impl_->stats.clear();
}

}  // namespace qfx::runtime
