// The CUDA kernels' shared host side: device check, requantization parameters,
// host-staged runs.
#include "staging.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "../reference/common.h"

namespace qfx::runtime::cuda {

bool device_ready(const KernelRequest& r) {
  const std::string& why = no_device_reason();
  if (!why.empty()) return r.decline("no CUDA device can run kernels (" + why + ")");
  for (const auto& m : r.in)
    for (int64_t d : m.shape)
      if (d == 0) return r.decline("an empty input (a dimension of size 0)");
  return true;
}

// Element strides of `s` broadcast to `o` (right-aligned; 0 on broadcast dims).
void broadcast_strides(const Shape& o, const Shape& s, int64_t* st) {
  int64_t step = 1;
  for (size_t d = o.size(); d-- > 0;) {
    const size_t back = o.size() - 1 - d;
    const int64_t dim = back < s.size() ? s[s.size() - 1 - back] : 1;
    st[d] = dim == 1 ? 0 : step;
    step *= dim;
  }
}

bool gemm_as_conv(const KernelRequest& r, bool gemm, GemmAsConv* l) {
  const ir::Node& n = r.node;
  if (r.consts.size() < 2 || !r.consts[1] || r.consts[1]->shape().size() != 2) return r.decline("needs a constant 2-D weight");
  if (gemm && (n.attr_i("transA", 0) != 0 || n.attr_f("alpha", 1.0f) != 1.0f || n.attr_f("beta", 1.0f) != 1.0f))
    return r.decline("transA, alpha or beta other than the defaults");
  const bool tb = gemm && n.attr_i("transB", 0) != 0;
  const Tensor& b = *r.consts[1];
  const Shape& x = r.in[0].shape;
  const int64_t K = tb ? b.shape()[1] : b.shape()[0], M = tb ? b.shape()[0] : b.shape()[1];
  if (x.empty() || x.back() != K || K <= 0 || M <= 0) return r.decline("inner dimensions differ");
  l->g = ref::Geom{};
  l->g.N = ref::numel(x) / K, l->g.C = K, l->g.H = l->g.W = 1, l->g.M = M, l->g.kH = l->g.kW = 1, l->g.oH = l->g.oW = 1;
  l->g.sH = l->g.sW = l->g.dH = l->g.dW = 1, l->g.group = 1;
  l->w = Tensor({M, K}, b.dtype());
  const size_t e = dtype_size(b.dtype());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t kk = 0; kk < K; ++kk)
      std::memcpy(static_cast<char*>(l->w.raw()) + (m * K + kk) * e,
                  static_cast<const char*>(b.raw()) + (tb ? m * K + kk : kk * M + m) * e, e);
  l->out.assign(x.begin(), x.end() - 1);
  l->out.push_back(M);
  return true;
}

bool code_type(DType d, CodeType* t) {
  if (d == DType::kUInt8) *t = kU8;
  else if (d == DType::kInt8) *t = kS8;
  else return false;
  return true;
}

DevRequant dev_requant(const Requantizer& rq, int32_t zp, int32_t lo, int32_t hi, const std::string& what) {
  DevRequant d;
  RequantArgs& a = d.args;
  static_cast<hd::RequantView&>(a) = rq.view();  // then the multipliers' device copies
  a.zp = zp;
  a.lo = lo;
  a.hi = hi;
  d.mult = upload(rq.multipliers().data(), rq.multipliers().size() * sizeof(float), what + " multipliers");
  std::vector<QuantizedMultiplier> q = rq.quantized();
  q.resize(rq.multipliers().size());  // kFloat keeps none; the device never reads them then
  d.q = upload(q.data(), q.size() * sizeof(QuantizedMultiplier), what + " integer multipliers");
  a.mult = d.mult.as<float>();
  a.q = d.q.as<QuantizedMultiplier>();
  return d;
}

namespace {

// memcpy split over the OpenMP threads for large inputs: one thread copies a few GB/s,
// so a batch of images would otherwise wait on the copy into page-locked memory.
void parallel_copy(void* dst, const void* src, size_t bytes) {
  const int64_t chunks = std::min<int64_t>(omp_get_max_threads(), static_cast<int64_t>(bytes >> 20));
  if (chunks < 2) {
    std::memcpy(dst, src, bytes);
    return;
  }
#pragma omp parallel for num_threads(static_cast<int>(chunks))
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t b0 = bytes * static_cast<size_t>(c) / static_cast<size_t>(chunks);
    const size_t b1 = bytes * static_cast<size_t>(c + 1) / static_cast<size_t>(chunks);
    std::memcpy(static_cast<char*>(dst) + b0, static_cast<const char*>(src) + b0, b1 - b0);
  }
}

// One staged kernel's buffers: device copies of host inputs (through page-locked
// memory, with an event saying when the last copy out of it finished) and device
// outputs for values the host reads. Made for the placement the planner chose (or,
// for a kernel run outside a plan, at its first run: everything on the host).
struct Staging {
  std::vector<size_t> staged;     // input indices the launch reads
  std::vector<size_t> in_bytes, out_bytes;
  std::vector<bool> in_dev, out_dev;  // by staged position / output: device-resident
  std::vector<DeviceMem> in, out;
  std::vector<PinnedMem> pinned;
  std::vector<CopyEvent> copied;
  bool ready = false;

  void make(const std::string& what) {
    in.clear(), out.clear(), pinned.clear(), copied.clear();
    for (size_t j = 0; j < staged.size(); ++j) {
      const bool host = !in_dev[j];
      in.push_back(host ? DeviceMem(in_bytes[j], what + " input") : DeviceMem());
      pinned.push_back(host ? PinnedMem(in_bytes[j], what + " input") : PinnedMem());
      copied.push_back(host ? CopyEvent(what) : CopyEvent());
    }
    for (size_t j = 0; j < out_bytes.size(); ++j)
      out.push_back(out_dev[j] ? DeviceMem() : DeviceMem(out_bytes[j], what + " output"));
    ready = true;
  }
};

}  // namespace

void stage(const KernelRequest& r, Kernel* k, const std::vector<size_t>& staged, Launch launch) {
  const std::string what = r.node.label();
  auto st = std::make_shared<Staging>();
  st->staged = staged;
  for (size_t j : staged) st->in_bytes.push_back(static_cast<size_t>(ref::numel(r.in[j].shape)) * dtype_size(r.in[j].dtype));
  for (const Meta& m : k->outputs) st->out_bytes.push_back(static_cast<size_t>(ref::numel(m.shape)) * dtype_size(m.dtype));
  st->in_dev.assign(staged.size(), false);
  st->out_dev.assign(k->outputs.size(), false);
  k->device_io = true;
  // Where the planner keeps each input and output: device-resident ones are read and
  // written in place, the others go through the kernel's own buffers.
  k->place = [st, what](const std::vector<bool>& i, const std::vector<bool>& o) {
    for (size_t j = 0; j < st->staged.size(); ++j) st->in_dev[j] = st->staged[j] < i.size() && i[st->staged[j]];
    for (size_t j = 0; j < st->out_dev.size(); ++j) st->out_dev[j] = j < o.size() && o[j];
    st->make(what);
  };
  k->run = [st, launch, what](const std::vector<const Tensor*>& i, const std::vector<Tensor*>& o) {
    if (!st->ready) st->make(what);
    cudaStream_t s = stream();
    std::vector<const void*> din;
    std::vector<void*> dout;
    for (size_t j = 0; j < st->staged.size(); ++j) {
      const Tensor& t = *i[st->staged[j]];
      if (st->in_dev[j]) {
        din.push_back(t.raw());
        continue;
      }
      st->copied[j].wait();  // the last copy out of the page-locked buffer is done
      parallel_copy(st->pinned[j].get(), t.raw(), st->in_bytes[j]);
      to_device(st->in[j].get(), st->pinned[j].get(), st->in_bytes[j], s);
      st->copied[j].record(s);
      din.push_back(st->in[j].get());
    }
    bool host_out = false;
    for (size_t j = 0; j < st->out_bytes.size(); ++j) {
      dout.push_back(st->out_dev[j] ? o[j]->raw() : st->out[j].get());
      host_out = host_out || !st->out_dev[j];
    }
    launch(din, dout, s);
    for (size_t j = 0; j < st->out_bytes.size(); ++j)
      if (!st->out_dev[j]) to_host(o[j]->raw(), st->out[j].get(), st->out_bytes[j], s);
    // Only a value the host reads waits for the device; between device kernels the
    // stream orders the work.
    if (host_out) finish(s, what);
    else check_launch(what);
  };
}

}  // namespace qfx::runtime::cuda
