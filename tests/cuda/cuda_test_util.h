// Helpers of the CUDA tests: skipping with the reason where no device runs kernels,
// and running one node on the `cuda` and `reference` backends side by side.
#pragma once

#include <gtest/gtest.h>

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

/// Builds node `n` on "cuda" and "reference" at the inputs' shapes (`metas_of` the
/// non-null `shapes`, constants `consts`), runs both on `inputs`, and expects the
/// CUDA implementation to have run it and every output byte to be equal.
inline void expect_cuda_equals_reference(const ir::Node& n, const std::vector<const Tensor*>& shapes,
                                         const std::vector<const Tensor*>& consts, const std::vector<const Tensor*>& inputs,
                                         const std::string& what) {
  std::vector<Meta> in;
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back({inputs[i]->shape(), inputs[i]->dtype()});
  (void)shapes;
  KernelChoice choice;
  Kernel ref = make_kernel(n, in, consts, "reference");
  Kernel dev = make_kernel(n, in, consts, "cuda", false, &choice);
  std::string why;
  for (const auto& d : choice.declined) why += d.impl + ": " + d.reason + "; ";
  ASSERT_EQ(dev.impl, "cuda") << what << " declined: " << why;
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

}  // namespace qfx::runtime::test
