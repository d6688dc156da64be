// The CUDA kernels' shared host side: device check, requantization parameters,
// host-staged runs.
#include "staging.h"

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

bool code_type(DType d, CodeType* t) {
  if (d == DType::kUInt8) *t = kU8;
  else if (d == DType::kInt8) *t = kS8;
  else return false;
  return true;
}

DevRequant dev_requant(const Requantizer& rq, int32_t zp, int32_t lo, int32_t hi, const std::string& what) {
  DevRequant d;
  RequantArgs& a = d.args;
  a.mode = rq.mode();
  a.rounding = rq.rounding();
  a.bits = rq.bits();
  a.acc_bits = rq.accumulator_bits();
  a.overflow = rq.overflow();
  a.per_channel = rq.multipliers().size() > 1;
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

void stage(const KernelRequest& r, Kernel* k, const std::vector<size_t>& staged, Launch launch) {
  const std::string what = r.node.label();
  std::vector<DeviceMem> in, out;
  for (size_t j : staged) in.emplace_back(static_cast<size_t>(ref::numel(r.in[j].shape)) * dtype_size(r.in[j].dtype), what + " input");
  for (const Meta& m : k->outputs) out.emplace_back(static_cast<size_t>(ref::numel(m.shape)) * dtype_size(m.dtype), what + " output");
  // Where the planner keeps each input and output (Kernel::place): device-resident
  // ones are read and written in place, the others go through the kernel's buffers.
  struct Placement {
    std::vector<bool> in, out;
  };
  auto where = std::make_shared<Placement>();
  where->in.assign(r.in.size(), false);
  where->out.assign(k->outputs.size(), false);
  k->device_io = true;
  k->place = [where](const std::vector<bool>& i, const std::vector<bool>& o) {
    where->in = i;
    where->out = o;
  };
  k->run = [in, out, staged, launch, what, where](const std::vector<const Tensor*>& i, const std::vector<Tensor*>& o) {
    cudaStream_t s = stream();
    std::vector<const void*> din;
    std::vector<void*> dout;
    for (size_t j = 0; j < staged.size(); ++j) {
      const size_t at = staged[j];
      if (at < where->in.size() && where->in[at]) {
        din.push_back(i[at]->raw());
      } else {
        to_device(in[j].get(), i[at]->raw(), in[j].bytes(), s);
        din.push_back(in[j].get());
      }
    }
    bool host_out = false;
    for (size_t j = 0; j < out.size(); ++j) {
      const bool dev = j < where->out.size() && where->out[j];
      dout.push_back(dev ? o[j]->raw() : out[j].get());
      host_out = host_out || !dev;
    }
    launch(din, dout, s);
    for (size_t j = 0; j < out.size(); ++j)
      if (!(j < where->out.size() && where->out[j])) to_host(o[j]->raw(), out[j].get(), out[j].bytes(), s);
    // Only a value the host reads waits for the device; between device kernels the
    // stream orders the work.
    if (host_out) finish(s, what);
    else check_launch(what);
  };
}

}  // namespace qfx::runtime::cuda
