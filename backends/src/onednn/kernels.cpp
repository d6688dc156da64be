// The `onednn` backend's registrations: oneDNN's fp32 convolution, inner product
// and pooling (fp32.cpp) and its int8 convolution and matmul (int8.cpp).
#include <string>

#include "common.h"

namespace qfx::runtime {
namespace {

// oneDNN raises dnnl::error for a configuration it has no implementation of:
// that is a decline, and the next implementation runs the node. An empty input
// (a dimension of size 0) is declined before oneDNN sees it: its primitive
// descriptors divide by the dims (SIGFPE in oneDNN 2.x).
KernelFactory guarded(bool (*f)(const KernelRequest&, Kernel*)) {
  return [f](const KernelRequest& r, Kernel* k) {
    for (const auto& m : r.in)
      for (int64_t d : m.shape)
        if (d == 0) return r.decline("an empty input (a dimension of size 0); the reference runs it");
    try {
      return f(r, k);
    } catch (const dnnl::error& e) {
      return r.decline(std::string("oneDNN has no implementation: ") + e.what());
    }
  };
}

}  // namespace

void register_onednn_kernels() {
  const bool nhwc = true;  // the convolutions and pools take channels-last values
  add_kernel("onednn", "Conv", "onednn", guarded(onednn::conv_fp32), nhwc);
  for (const char* op : {"Gemm", "MatMul"}) add_kernel("onednn", op, "onednn", guarded(onednn::inner_product_fp32));
  for (const char* op : {"MaxPool", "AveragePool"}) add_kernel("onednn", op, "onednn", guarded(onednn::pool_fp32), nhwc);
  add_kernel("onednn", "QLinearConv", "onednn", guarded(onednn::qconv_qgemm), nhwc);
  for (const char* op : {"QGemm", "QLinearMatMul"}) add_kernel("onednn", op, "onednn", guarded(onednn::qconv_qgemm));
}

}  // namespace qfx::runtime
