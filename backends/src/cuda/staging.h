// Internal: what every CUDA kernel factory shares: the device check, the
// requantization handed to the device, and the host-staged run (inputs copied to the
// device, the launch, outputs copied back).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "../kernels.h"
#include "device.h"

namespace qfx::runtime::cuda {

/// False, with the reason recorded, when no CUDA device can run kernels.
bool device_ready(const KernelRequest& r);

/// kU8 / kS8 for an 8-bit dtype; false for any other.
bool code_type(DType d, CodeType* t);

/// Element strides of a tensor of shape `s` broadcast (numpy rules, right-aligned) to
/// `o`: 0 on broadcast dimensions. `st` holds o.size() values.
void broadcast_strides(const Shape& o, const Shape& s, int64_t* st);

/// A Requantizer's parameters on the device, with the output zero point and clamp.
struct DevRequant {
  RequantArgs args;
  DeviceMem mult, q;
};
DevRequant dev_requant(const Requantizer& rq, int32_t zp, int32_t lo, int32_t hi, const std::string& what);

/// Launches a kernel's work on `s` given the device copies of its staged inputs and
/// its device outputs.
using Launch = std::function<void(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s)>;

/// Fills k->run: inputs `staged` (indices into the request's inputs) are copied to
/// device buffers made now, `launch` runs, every output of k->outputs is copied back,
/// and the stream is waited for (errors: ExecutionError naming the node).
void stage(const KernelRequest& r, Kernel* k, const std::vector<size_t>& staged, Launch launch);

/// Registration of the CUDA kernels of conv_kernels.cpp and eltwise_kernels.cpp.
void register_conv_kernels();
void register_eltwise_kernels();
void register_float_kernels();

}  // namespace qfx::runtime::cuda
