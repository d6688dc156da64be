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
  k->impl = "cuda";
  k->run = [in, out, staged, launch, what](const std::vector<const Tensor*>& i, const std::vector<Tensor*>& o) {
    cudaStream_t s = stream();
    std::vector<const void*> din;
    std::vector<void*> dout;
    for (size_t j = 0; j < staged.size(); ++j) {
      to_device(in[j].get(), i[staged[j]]->raw(), in[j].bytes(), s);
      din.push_back(in[j].get());
    }
    for (const DeviceMem& m : out) dout.push_back(m.get());
    launch(din, dout, s);
    for (size_t j = 0; j < out.size(); ++j) to_host(o[j]->raw(), out[j].get(), out[j].bytes(), s);
    finish(s, what);
  };
}

}  // namespace qfx::runtime::cuda
