// The planner: kernels from the registry for concrete input shapes, channels-last
// layouts between layers where every consumer takes them, shape arithmetic folded
// at plan time, and the memory plan (one arena; values whose lifetimes do not
// overlap share a slot).
#include <algorithm>
#include <cstdlib>

#include "model_impl.h"
#include "qfx/runtime/registry.h"
#include "qfx/error.h"

namespace qfx::runtime {
namespace {

constexpr size_t kAlign = 64;

// Makes `k` take plain copies of its channels-last inputs (buffers owned by the
// kernel, allocated now: running still allocates nothing).
void plain_inputs(Kernel* k, const std::vector<Meta>& in) {
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


// An input's shape (declared, dynamic dims as 1, or given to run), before any kernel
// multiplies or divides by it: dims non-negative, and its bytes representable and
// within this machine's memory. DataError naming the input and the dimension that
// goes past (a declared 2^40 once reached a division by a wrapped product).
void check_input_shape(const TensorInfo& in, const std::vector<int64_t>& s) {
  const auto what = [&](size_t d) {
    return "input '" + in.name + "' " + shape_str(s) + " (dimension " + std::to_string(d) + " of " + std::to_string(s[d]) + ")";
  };
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] < 0) throw DataError(what(d) + " is negative");
  if (std::find(s.begin(), s.end(), int64_t{0}) != s.end()) return;  // empty
  if (s.empty()) return;
  const size_t largest = static_cast<size_t>(std::max_element(s.begin(), s.end()) - s.begin());
  uint64_t bytes = dtype_size(in.dtype);
  for (int64_t d : s)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) || bytes > (uint64_t{1} << 48))
      throw DataError(what(largest) + " makes more than 2^48 bytes, more than any machine's memory");
  check_allocatable(bytes, [&] { return what(largest); });
}

}  // namespace

SlotPlan Model::Impl::plan_slots(const std::vector<Meta>& meta, const std::vector<Tensor>& folded, std::vector<int> last_use,
                                 const std::vector<char>& member) const {
  const Model::Impl& im = *this;
  struct Slot {
    size_t size = 0;
    bool free = true;
  };
  const size_t nv = meta.size();
  std::vector<Slot> slots;
  SlotPlan sp;
  sp.slot_of.assign(nv, -1);
  for (size_t n = 0; n < im.g.nodes.size(); ++n) {
    for (int v : im.node_out[n]) {
      if (v < 0 || folded[static_cast<size_t>(v)].defined() || !member[static_cast<size_t>(v)]) continue;
      const Meta& m = meta[static_cast<size_t>(v)];
      // Checked: a negative dim or a product past 2^62 bytes is a malformed model, not a
      // wrapped offset (the ONNX fuzzer found an arena offset overflowing).
      int64_t cnt = 1;
      for (auto d : m.shape)
        if (d < 0 || __builtin_mul_overflow(cnt, d, &cnt) || cnt > (int64_t{1} << 60))
          throw DataError(im.g.nodes[n].label() + ": output shape " + shape_str(m.shape) + " is negative or too large");
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
      sp.slot_of[static_cast<size_t>(v)] = best;
      if (last_use[static_cast<size_t>(v)] < 0) last_use[static_cast<size_t>(v)] = static_cast<int>(n);  // unused output
    }
    for (size_t v = 0; v < nv; ++v)
      if (sp.slot_of[v] >= 0 && last_use[v] == static_cast<int>(n)) slots[static_cast<size_t>(sp.slot_of[v])].free = true;
  }
  sp.offset.resize(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    sp.offset[s] = sp.total;
    if (__builtin_add_overflow(sp.total, slots[s].size, &sp.total)) throw DataError("the model's intermediate values overflow the address space");
  }
  return sp;
}

DevicePlacement Model::Impl::place_on_device(Plan& p, const std::vector<Tensor>& folded) const {
  const Model::Impl& im = *this;
  const size_t nv = im.value_name.size();
  DevicePlacement d;
  d.device.assign(nv, 0);
  for (const std::string& b : backend_chain(im.backend_name)) {
    const BackendInfo info = backend_info(b);
    if (info.device_alloc) {
      d.alloc = info.device_alloc;
      d.to_host = info.device_to_host;
      break;
    }
  }
  if (!d.alloc) return d;
  // A channels-last value stays on the device only if every consumer reads that
  // layout: the planner converts it for the others on the host (plain_inputs).
  std::vector<char> ok(nv, 0), bad(nv, 0), nhwc(nv, 0);
  for (size_t n = 0; n < im.g.nodes.size(); ++n) {
    const Kernel& k = p.kernels[n];
    const bool dev = k.run && k.device_io;
    for (size_t o = 0; o < im.node_out[n].size(); ++o)
      if (const int v = im.node_out[n][o]; v >= 0) {
        ok[static_cast<size_t>(v)] = dev && !folded[static_cast<size_t>(v)].defined();
        nhwc[static_cast<size_t>(v)] = o < k.outputs.size() && k.outputs[o].nhwc;
      }
    for (int v : im.node_in[n])
      if (v >= 0 && (!dev || (nhwc[static_cast<size_t>(v)] && !k.accepts_nhwc))) bad[static_cast<size_t>(v)] = 1;
  }
  for (int v : im.output_ids) bad[static_cast<size_t>(v)] = 1;
  for (const auto& k : im.keep) {
    auto it = im.value_id.find(k);
    if (it != im.value_id.end()) bad[static_cast<size_t>(it->second)] = 1;
  }
  for (size_t v = 0; v < nv; ++v) d.device[v] = ok[v] && !bad[v] && !im.const_of[v];
  for (size_t n = 0; n < im.g.nodes.size(); ++n) {
    Kernel& k = p.kernels[n];
    if (!k.run || !k.device_io || !k.place) continue;
    std::vector<bool> in, out;
    for (int v : im.node_in[n]) in.push_back(v >= 0 && d.device[static_cast<size_t>(v)]);
    for (int v : im.node_out[n]) out.push_back(v >= 0 && d.device[static_cast<size_t>(v)]);
    k.place(in, out);
    p.choices[n].device_outputs = std::find(out.begin(), out.end(), true) != out.end();
  }
  return d;
}

std::vector<char> Model::Impl::nhwc_values() const {
  // Channels last between layers (onednn backend; float and int8): a value may be
  // stored NHWC when it is not a graph output and every consumer is an op whose
  // kernels take that layout. A consumer kernel that turns out not to (a reference fallback)
  // gets a plain copy, so this is only ever a speed decision.
  const size_t nv = value_name.size();
  std::vector<char> nhwc_ok(nv, 0);
  if (nhwc_ops.empty()) return nhwc_ok;
  std::vector<char> bad(nv, 0), used(nv, 0);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : node_in[n])
      if (v >= 0) {
        used[static_cast<size_t>(v)] = 1;
        if (!nhwc_ops.count(g.nodes[n].op)) bad[static_cast<size_t>(v)] = 1;
      }
  for (int v : output_ids) bad[static_cast<size_t>(v)] = 1;
  if (!keep_any_layout)  // otherwise watched as stored
    for (const auto& k : keep) {
      auto it = value_id.find(k);
      if (it != value_id.end()) bad[static_cast<size_t>(it->second)] = 1;
    }
  for (size_t v = 0; v < nv; ++v) nhwc_ok[v] = used[v] && !bad[v];
  return nhwc_ok;
}

// A Shape node's output from its input's planned shape: a plan constant.
static Tensor shape_value(const ir::Node& node, const std::vector<int64_t>& s) {
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t b = node.attr_i("start", 0), e = node.attr_i("end", r);
  b = std::min(std::max(b < 0 ? b + r : b, int64_t{0}), r);
  e = std::min(std::max(e < 0 ? e + r : e, int64_t{0}), r);
  Tensor t({std::max<int64_t>(e - b, 0)}, DType::kInt64);
  for (int64_t i = b; i < e; ++i) t.data<int64_t>()[i - b] = s[static_cast<size_t>(i)];
  return t;
}

void Model::Impl::plan_node(size_t n, PlanState& st, Plan& p) const {
  const ir::Node& node = g.nodes[n];
  std::vector<Meta> in;
  std::vector<const Tensor*> consts;
  bool all_const = !node_in[n].empty();
  for (int v : node_in[n]) {
    in.push_back(v < 0 ? Meta{} : st.meta[static_cast<size_t>(v)]);
    consts.push_back(st.constant(v, const_of));
    if (v >= 0 && !consts.back()) all_const = false;
  }
  if (node.op == "Shape" && !in.empty()) {  // evaluated now, once per plan
    const Tensor t = shape_value(node, in[0].shape);
    st.folded[static_cast<size_t>(node_out[n][0])] = t;
    st.meta[static_cast<size_t>(node_out[n][0])] = {t.shape(), t.dtype()};
    p.kernels.push_back(Kernel{});
    KernelChoice c;
    c.node = node.name;
    c.op = node.op;
    c.impl = "planner";
    c.folded = true;
    p.choices.push_back(c);
    return;
  }
  const bool out_nhwc = !all_const && node_out[n].size() == 1 && node_out[n][0] >= 0 &&
                        st.nhwc_ok[static_cast<size_t>(node_out[n][0])];
  KernelChoice choice;
  Kernel k = make_kernel(node, in, consts, all_const ? "reference" : backend_name, out_nhwc, &choice);
  choice.folded = all_const;
  if (!k.outputs.empty()) choice.dtype = dtype_name(k.outputs[0].dtype);
  for (size_t i = 0; i < node_in[n].size() && i < node.inputs.size(); ++i)  // the graph's edges (constants left out)
    if (node_in[n][i] >= 0 && !consts[i]) choice.inputs.push_back(node.inputs[i]);
  for (size_t o = 0; o < node_out[n].size() && o < node.outputs.size(); ++o)
    if (node_out[n][o] >= 0) choice.outputs.push_back(node.outputs[o]);
  p.choices.push_back(std::move(choice));
  if (!k.accepts_nhwc) plain_inputs(&k, in);
  if (k.outputs.size() < node_out[n].size()) throw UnsupportedOpError(node.label() + ": produces fewer outputs than the model uses");
  for (size_t o = 0; o < node_out[n].size(); ++o)
    if (node_out[n][o] >= 0) st.meta[static_cast<size_t>(node_out[n][o])] = k.outputs[o];
  if (all_const) {  // shape arithmetic around Resize, Reshape, ...: evaluated now
    std::vector<Tensor*> outs;
    for (size_t o = 0; o < node_out[n].size(); ++o) {
      if (node_out[n][o] < 0) {
        outs.push_back(nullptr);
        continue;
      }
      Tensor& t = st.folded[static_cast<size_t>(node_out[n][o])];
      t = Tensor(k.outputs[o].shape, k.outputs[o].dtype);
      outs.push_back(&t);
    }
    k.run(consts, outs);
    k.run = nullptr;
  }
  p.kernels.push_back(std::move(k));
}

void Model::Impl::allocate(Plan& p, const PlanState& st, const std::vector<std::vector<int64_t>>& in_shapes) const {
  // Memory plan: lifetimes, then greedy slot sharing, in host memory and, for values
  // that stay on a device between device kernels, in the backend's device memory.
  const size_t nv = value_name.size();
  std::vector<int> last_use(nv, -1);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : node_in[n])
      if (v >= 0) last_use[static_cast<size_t>(v)] = static_cast<int>(n);
  for (int v : output_ids) last_use[static_cast<size_t>(v)] = static_cast<int>(g.nodes.size());
  const DevicePlacement dev = place_on_device(p, st.folded);
  std::vector<char> on_host(nv, 1);
  for (size_t v = 0; v < nv; ++v) on_host[v] = !dev.device[v];
  const SlotPlan host = plan_slots(st.meta, st.folded, last_use, on_host);
  SlotPlan device;
  if (dev.alloc) device = plan_slots(st.meta, st.folded, last_use, dev.device);
  p.meta = st.meta;
  const auto shapes_of = [&] {
    std::string shapes;
    for (const auto& sh : in_shapes) shapes += (shapes.empty() ? "" : ", ") + shape_str(sh);
    return "the model's intermediate values for input shapes " + shapes;
  };
  if (max_plan_bytes > 0 && host.total > max_plan_bytes)
    throw DataError(shapes_of() + " need " + std::to_string(host.total) + " bytes, more than ModelOptions::max_plan_bytes (" +
                    std::to_string(max_plan_bytes) + ")");
  check_allocatable(host.total, shapes_of);
  p.arena = std::shared_ptr<uint8_t[]>(new uint8_t[std::max<size_t>(host.total, kAlign)]);
  if (dev.alloc && device.total > 0) p.device_arena = dev.alloc(device.total);
  p.device = dev.device;
  p.device_to_host = dev.to_host;
  bind_values(p, st, host, device);
}

void Model::Impl::bind_values(Plan& p, const PlanState& st, const SlotPlan& host, const SlotPlan& device) const {
  const size_t nv = value_name.size();
  auto view = [&](const std::shared_ptr<uint8_t[]>& arena, size_t offset, size_t v) {
    return Tensor(st.meta[v].shape, st.meta[v].dtype, std::shared_ptr<uint8_t[]>(arena, arena.get() + offset));
  };
  p.values.resize(nv);
  for (size_t v = 0; v < nv; ++v) {
    if (const_of[v]) p.values[v] = *const_of[v];
    else if (st.folded[v].defined()) p.values[v] = st.folded[v];
    else if (p.device[v] && device.slot_of[v] >= 0) p.values[v] = view(p.device_arena, device.offset[static_cast<size_t>(device.slot_of[v])], v);
    else if (host.slot_of[v] >= 0) p.values[v] = view(p.arena, host.offset[static_cast<size_t>(host.slot_of[v])], v);
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    std::vector<const Tensor*> in;
    for (int v : node_in[n]) in.push_back(v < 0 ? nullptr : &p.values[static_cast<size_t>(v)]);
    std::vector<Tensor*> out;
    for (int v : node_out[n]) out.push_back(v < 0 ? nullptr : &p.values[static_cast<size_t>(v)]);
    p.in_ptrs.push_back(std::move(in));
    p.out_ptrs.push_back(std::move(out));
  }
}

std::unique_ptr<Plan> Model::Impl::build(const std::vector<std::vector<int64_t>>& in_shapes) const {
  for (size_t i = 0; i < inputs.size() && i < in_shapes.size(); ++i) check_input_shape(inputs[i], in_shapes[i]);
  auto p = std::make_unique<Plan>();
  PlanState st;
  const size_t nv = value_name.size();
  st.meta.resize(nv);
  st.folded.resize(nv);
  for (size_t v = 0; v < nv; ++v)
    if (const_of[v]) st.meta[v] = {const_of[v]->shape(), const_of[v]->dtype()};
  for (size_t i = 0; i < input_ids.size(); ++i) st.meta[static_cast<size_t>(input_ids[i])] = {in_shapes[i], inputs[i].dtype};
  st.nhwc_ok = nhwc_values();
  for (size_t n = 0; n < g.nodes.size(); ++n) plan_node(n, st, *p);
  allocate(*p, st, in_shapes);
  return p;
}

}  // namespace qfx::runtime
