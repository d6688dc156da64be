// Internal: int8 GEMM with int32 accumulation through cuBLASLt (IMMA tensor cores).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "args.h"

namespace qfx::runtime::cuda {

/// g[rows, m] (row-major int32) = a[rows, k] · b[m, k]^T for int8 a and b, exact
/// int32 sums (cuBLASLt, CUBLAS_COMPUTE_32I; column-major op(A)=T, op(B)=N: the
/// layout int8 tensor-core kernels take). k must be a multiple of 4.
class Int8Gemm {
 public:
  /// Plans the product for fixed sizes. ok() is false, with why(), when cuBLASLt
  /// has no algorithm for them (the caller runs a direct kernel instead).
  Int8Gemm(int64_t rows, int64_t m, int64_t k);
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  /// Runs on `s`; `b` is the weight [m, k]. Throws ExecutionError on a cuBLASLt error.
  void run(const int8_t* a, const int8_t* b, int32_t* g, cudaStream_t s) const;
  /// Times each algorithm the heuristic offered (up to 8; one warm-up and the best of
  /// three runs each) on these operands and keeps the fastest. Any of them gives the
  /// same exact int32 sums. Waits for the device; call when the plan is built.
  void tune(const int8_t* a, const int8_t* b, int32_t* g);

  /// The cuBLASLt handle, descriptors, algorithms and workspace (gemm_lt.cpp).
  struct State;

 private:
  std::shared_ptr<State> st_;
  bool ok_ = false;
  std::string why_;
};

}  // namespace qfx::runtime::cuda
