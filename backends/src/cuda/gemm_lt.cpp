// int8 x int8 -> int32 GEMM through cuBLASLt: the layouts, the heuristic's algorithm
// and its workspace are chosen once per kernel.
#include "gemm_lt.h"

#include <algorithm>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "device.h"
#include "qfx/error.h"

namespace qfx::runtime::cuda {

struct Int8Gemm::State {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;
  DeviceMem workspace;
  size_t ws_bytes = 0;
  ~State() {
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    if (h) cublasLtDestroy(h);
  }
};

Int8Gemm::Int8Gemm(int64_t rows, int64_t m, int64_t k) : st_(std::make_shared<State>()) {
  auto fail = [&](const std::string& w) { why_ = "cuBLASLt: " + w; };
  State& s = *st_;
  if (cublasLtCreate(&s.h) != CUBLAS_STATUS_SUCCESS) { fail("cublasLtCreate failed"); return; }
  if (cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32I, CUDA_R_32I) != CUBLAS_STATUS_SUCCESS)
    { fail("no int32 matmul descriptor"); return; }
  const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
  cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt);
  // Column-major: A is the weight as k x m (op T), B the rows as k x rows, C m x rows.
  if (cublasLtMatrixLayoutCreate(&s.la, CUDA_R_8I, k, m, k) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&s.lb, CUDA_R_8I, k, rows, k) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&s.lc, CUDA_R_32I, m, rows, m) != CUBLAS_STATUS_SUCCESS)
    { fail("matrix layouts"); return; }
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  s.ws_bytes = size_t{32} << 20;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &s.ws_bytes, sizeof s.ws_bytes);
  cublasLtMatmulHeuristicResult_t res[8] = {};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(s.h, s.op, s.la, s.lb, s.lc, s.lc, pref, 8, res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    { fail("no int8 algorithm for " + std::to_string(rows) + " x " + std::to_string(m) + " x " + std::to_string(k)); return; }
  s.algo = res[0].algo;
  s.ws_bytes = 0;
  for (int i = 0; i < found; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    s.candidates.push_back(res[i].algo);
    s.ws_bytes = std::max(s.ws_bytes, res[i].workspaceSize);
  }
  s.workspace = DeviceMem(std::max<size_t>(s.ws_bytes, 1), "cuBLASLt workspace");
  ok_ = true;
}

namespace {

cublasStatus_t matmul(const Int8Gemm::State& s, const cublasLtMatmulAlgo_t& algo, const int8_t* a, const int8_t* b, int32_t* g,
                      cudaStream_t stream) {
  const int32_t one = 1, zero = 0;
  return cublasLtMatmul(s.h, s.op, &one, b, s.la, a, s.lb, &zero, g, s.lc, g, s.lc, &algo, s.workspace.get(), s.ws_bytes,
                        stream);
}

}  // namespace

void Int8Gemm::run(const int8_t* a, const int8_t* b, int32_t* g, cudaStream_t stream) const {
  const cublasStatus_t st = matmul(*st_, st_->algo, a, b, g, stream);
  if (st != CUBLAS_STATUS_SUCCESS) throw ExecutionError("cuBLASLt int8 matmul failed (status " + std::to_string(st) + ")");
}

void Int8Gemm::tune(const int8_t* a, const int8_t* b, int32_t* g) {
  State& s = *st_;
  if (s.candidates.size() < 2) return;
  cudaStream_t stream = cuda::stream();
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  if (cudaEventCreate(&t0) != cudaSuccess || cudaEventCreate(&t1) != cudaSuccess) {
    if (t0) cudaEventDestroy(t0);
    return;  // untuned: the heuristic's first choice stays
  }
  float best = -1.0f;
  for (const auto& algo : s.candidates) {
    if (matmul(s, algo, a, b, g, stream) != CUBLAS_STATUS_SUCCESS) continue;
    float fastest = -1.0f;
    for (int rep = 0; rep < 3; ++rep) {
      cudaEventRecord(t0, stream);
      matmul(s, algo, a, b, g, stream);
      cudaEventRecord(t1, stream);
      float ms = 0.0f;
      if (cudaEventSynchronize(t1) != cudaSuccess || cudaEventElapsedTime(&ms, t0, t1) != cudaSuccess) continue;
      fastest = fastest < 0.0f ? ms : std::min(fastest, ms);
    }
    if (fastest >= 0.0f && (best < 0.0f || fastest < best)) {
      best = fastest;
      s.algo = algo;
    }
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  finish(stream, "tuning the cuBLASLt int8 matmul");
}

}  // namespace qfx::runtime::cuda
