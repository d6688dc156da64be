// Internal: what every CUDA kernel factory shares: the device check, the
// requantization handed to the device, and the host-staged run (inputs copied to the
// device, the launch, outputs copied back).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "../kernels.h"
#include "../reference/common.h"
#include "device.h"

namespace qfx::runtime::cuda {

/// False, with the reason recorded, when no CUDA device can run kernels.
bool device_ready(const KernelRequest& r);

/// kU8 / kS8 for an 8-bit dtype; false for any other.
bool code_type(DType d, CodeType* t);

/// Element strides of a tensor of shape `s` broadcast (numpy rules, right-aligned) to
/// `o`: 0 on broadcast dimensions. `st` holds o.size() values.
void broadcast_strides(const Shape& o, const Shape& s, int64_t* st);

/// The geometry fields of ConvArgs / FConvArgs from the reference kernels' Geom.
template <typename A>
void set_geometry(A* a, const ref::Geom& g) {
  a->N = g.N, a->C = g.C, a->H = g.H, a->W = g.W, a->M = g.M, a->kH = g.kH, a->kW = g.kW, a->oH = g.oH, a->oW = g.oW;
  a->sH = g.sH, a->sW = g.sW, a->dH = g.dH, a->dW = g.dW, a->pT = g.pT, a->pL = g.pL, a->group = g.group;
}

/// A Gemm-like node with a constant 2-D weight (input 1) as a 1x1 convolution over
/// [rows, K, 1, 1]: geometry, the weight as rows [M, K] (output channel major, input
/// 1 transposed unless transB), and the output shape [..., M].
struct GemmAsConv {
  ref::Geom g{};
  Tensor w;
  Shape out;
};
/// For QGemm / Gemm (`gemm`: transA 0, alpha 1, beta 1) and QLinearMatMul / MatMul.
/// False, with the reason recorded, for a computed or non-2-D weight, other Gemm
/// attributes, or inner dimensions that differ.
bool gemm_as_conv(const KernelRequest& r, bool gemm, GemmAsConv* l);

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
