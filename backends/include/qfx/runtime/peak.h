// This machine's measured matrix-multiply throughput: the limit qfx bench reports
// each model's speed against (issue: "know the limit").
#pragma once

#include <cstdint>
#include <string>

namespace qfx::runtime {

/// Measured peak throughput of oneDNN matrix multiplication on this machine, at
/// the OpenMP thread count in use (OMP_NUM_THREADS).
struct Peak {
  double fp32_gflops = 0;  ///< f32 x f32 -> f32: 2 * M * N * K / seconds / 1e9
  double int8_gops = 0;    ///< u8 x s8 -> s32, as the onednn backend runs int8 layers: 2 * M * N * K / seconds / 1e9
  int threads = 0;         ///< OpenMP threads the measurement ran on
  int64_t size = 0;        ///< M = N = K
  std::string fp32_impl;   ///< oneDNN's implementation of the f32 matmul ("brg:avx512_core", ...)
  std::string int8_impl;   ///< oneDNN's implementation of the int8 matmul ("brg:avx512_core_vnni", ...)
  /// Streaming read bandwidth from memory, GB/s (1e9 bytes): the best of `iters` sums
  /// of 256 MiB of float32 (8 times this class of machine's 32 MiB L3) on the same
  /// threads. What bounds a pass that reads tensors too large for the caches once,
  /// such as a tap's statistic at large batches.
  double read_gbps = 0;
};

/// Times `size`^3 matrix multiplications (oneDNN matmul primitives, weights in the
/// layout oneDNN prefers, as the runtime packs its layers' weights), best of
/// `iters` after one warm-up each. The int8 operands hold 7-bit values, which CPUs
/// without VNNI multiply without int16 saturation (the backend's default weights
/// there); the speed does not depend on the values. Also measures read_gbps. Takes
/// about two seconds at size 2048 on two cores. Throws ArgumentError if size < 64 or iters < 1.
Peak measure_peak(int64_t size = 2048, int iters = 5);

}  // namespace qfx::runtime
