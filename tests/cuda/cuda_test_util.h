// Helpers of the CUDA tests: skipping with the reason where no device runs kernels,
// and running one node on the `cuda` and `reference` backends side by side.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../../backends/src/kernels.h"
#include "qfx/runtime/cuda.h"

/// Skips the test (ctest reports it skipped) with the reason when no CUDA device can run kernels.
#define QFX_REQUIRE_CUDA()                                                                  \
  do {                                                                                      \
    const std::string why_ = qfx::runtime::cuda_unavailable_reason();                       \
    if (!why_.empty()) GTEST_SKIP() << "no CUDA device: " << why_;                          \
  } while (0)

namespace qfx::runtime::test {

/// True for the implementations the `cuda` backend registers.
inline bool is_cuda_impl(const std::string& impl) { return impl == "cuda" || impl == "cublaslt"; }

/// Node `n` built on "reference" and "cuda" at the shapes of `inputs` (constants
/// `consts`); `*why` lists the implementations that declined it on "cuda".
inline void build_on_both(const ir::Node& n, const std::vector<const Tensor*>& consts,
                          const std::vector<const Tensor*>& inputs, Kernel* ref, Kernel* dev, std::string* why) {
  std::vector<Meta> in;
  for (const Tensor* t : inputs) in.push_back({t->shape(), t->dtype()});
  KernelChoice choice;
  *ref = make_kernel(n, in, consts, "reference");
  *dev = make_kernel(n, in, consts, "cuda", false, &choice);
  for (const auto& d : choice.declined) *why += d.impl + ": " + d.reason + "; ";
}

/// Builds node `n` on "cuda" and "reference" at the shapes of `inputs` (constants
/// `consts`), runs both on `inputs`, and expects a CUDA implementation (`impl`, when
/// given) to have run it and every output byte to be equal.
inline void expect_cuda_equals_reference(const ir::Node& n, const std::vector<const Tensor*>& consts,
                                         const std::vector<const Tensor*>& inputs, const std::string& what,
                                         const std::string& impl = "") {
  Kernel ref, dev;
  std::string why;
  build_on_both(n, consts, inputs, &ref, &dev, &why);
  ASSERT_TRUE(is_cuda_impl(dev.impl)) << what << " ran on " << dev.impl << "; declined: " << why;
  if (!impl.empty()) EXPECT_EQ(dev.impl, impl) << what << "; declined: " << why;
  std::vector<Tensor> a, b;
  std::vector<Tensor*> pa, pb;
  for (size_t j = 0; j < ref.outputs.size(); ++j) {
    a.emplace_back(ref.outputs[j].shape, ref.outputs[j].dtype);
    b.emplace_back(dev.outputs[j].shape, dev.outputs[j].dtype);
  }
  for (size_t j = 0; j < a.size(); ++j) pa.push_back(&a[j]), pb.push_back(&b[j]);
  ref.run(inputs, pa);
  dev.run(inputs, pb);
  for (size_t j = 0; j < a.size(); ++j) {
    ASSERT_EQ(a[j].shape(), b[j].shape()) << what;
    ASSERT_EQ(a[j].dtype(), b[j].dtype()) << what;
    const auto* pr = static_cast<const unsigned char*>(a[j].raw());
    const auto* pd = static_cast<const unsigned char*>(b[j].raw());
    size_t differ = 0, first = 0;
    for (size_t k = 0; k < a[j].nbytes(); ++k)
      if (pr[k] != pd[k] && differ++ == 0) first = k;
    EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << a[j].nbytes() << " bytes differ, first at byte " << first;
  }
}

/// A plain NCHW tensor copied channels last ([N, H, W, C] in memory, the same logical shape).
inline Tensor to_nhwc(const Tensor& t) {
  Tensor o(t.shape(), t.dtype());
  const Shape& s = t.shape();
  const size_t e = dtype_size(t.dtype());
  const int64_t C = s[1], HW = s[2] * s[3];
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < HW; ++p)
        std::memcpy(static_cast<char*>(o.raw()) + ((n * HW + p) * C + c) * e,
                    static_cast<const char*>(t.raw()) + ((n * C + c) * HW + p) * e, e);
  return o;
}

/// Node `n` on "cuda" with its computed 4-D inputs channels last (`x_nhwc`) or plain,
/// and every consumer of its output taking channels last,
/// against the reference on plain inputs: the kernel must take those layouts, write its
/// output channels last exactly when `y_nhwc`, and every output code must be equal.
inline void expect_cuda_nhwc_equals_reference(const ir::Node& n, const std::vector<const Tensor*>& consts,
                                              const std::vector<const Tensor*>& inputs, const std::string& what,
                                              bool x_nhwc, bool y_nhwc, const std::string& impl = "") {
  std::vector<Meta> plain, laid;
  std::vector<Tensor> stored;
  stored.reserve(inputs.size());
  std::vector<const Tensor*> dev_in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool cl = x_nhwc && inputs[i]->shape().size() == 4 && !(i < consts.size() && consts[i]);
    plain.push_back({inputs[i]->shape(), inputs[i]->dtype()});
    laid.push_back({inputs[i]->shape(), inputs[i]->dtype(), cl});
    stored.push_back(cl ? to_nhwc(*inputs[i]) : *inputs[i]);
    dev_in.push_back(&stored.back());
  }
  KernelChoice choice;
  Kernel ref = make_kernel(n, plain, consts, "reference");
  Kernel dev = make_kernel(n, laid, consts, "cuda", true, &choice);
  std::string why;
  for (const auto& d : choice.declined) why += d.impl + ": " + d.reason + "; ";
  ASSERT_TRUE(is_cuda_impl(dev.impl)) << what << " ran on " << dev.impl << "; declined: " << why;
  if (!impl.empty()) EXPECT_EQ(dev.impl, impl) << what;
  if (x_nhwc) EXPECT_TRUE(dev.accepts_nhwc) << what << ": channels-last input not taken";
  ASSERT_EQ(ref.outputs.size(), 1u) << what;
  EXPECT_EQ(dev.outputs[0].nhwc, y_nhwc) << what << ": output layout";
  Tensor a(ref.outputs[0].shape, ref.outputs[0].dtype), b(dev.outputs[0].shape, dev.outputs[0].dtype);
  ref.run(inputs, {&a});
  dev.run(dev_in, {&b});
  Tensor got = b;
  if (dev.outputs[0].nhwc) {
    got = Tensor(b.shape(), b.dtype());
    nhwc_to_nchw(b.raw(), got.raw(), b.shape(), dtype_size(b.dtype()));
  }
  ASSERT_EQ(a.shape(), got.shape()) << what;
  size_t differ = 0;
  for (size_t k = 0; k < a.nbytes(); ++k)
    differ += static_cast<const unsigned char*>(a.raw())[k] != static_cast<const unsigned char*>(got.raw())[k];
  EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << a.nbytes() << " bytes differ";
}

/// max |a - b| / max |a| over two float32 tensors of equal size (0 when a is all 0).
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(a.data<float>()[i])));
  }
  return scale > 0 ? worst / scale : worst;
}

/// Float ops: node `n` on "cuda" and "reference" (as expect_cuda_equals_reference),
/// outputs within `tol` relative to the reference output's largest magnitude (sums
/// run in another order on the GPU).
inline void expect_cuda_near_reference(const ir::Node& n, const std::vector<const Tensor*>& consts,
                                       const std::vector<const Tensor*>& inputs, const std::string& what, double tol = 1e-4) {
  Kernel ref, dev;
  std::string why;
  build_on_both(n, consts, inputs, &ref, &dev, &why);
  ASSERT_TRUE(is_cuda_impl(dev.impl)) << what << " ran on " << dev.impl << "; declined: " << why;
  Tensor a(ref.outputs[0].shape, ref.outputs[0].dtype), b(dev.outputs[0].shape, dev.outputs[0].dtype);
  ref.run(inputs, {&a});
  dev.run(inputs, {&b});
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_LE(max_rel_diff(a, b), tol) << what;
}

}  // namespace qfx::runtime::test
