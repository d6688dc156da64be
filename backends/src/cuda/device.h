// Internal: the CUDA device as the runtime's CUDA kernels see it: whether one is
// there, device memory owned by kernels, copies, the stream of the calling thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "args.h"

typedef struct CUevent_st* cudaEvent_t;

namespace qfx::runtime::cuda {

/// Empty when a CUDA device can run kernels; otherwise why not ("no CUDA-capable
/// device is detected", a driver older than the toolkit, ...). Asked once per process.
const std::string& no_device_reason();

/// Device memory owned by a kernel (shared by copies of the kernel's closure).
class DeviceMem {
 public:
  DeviceMem() = default;
  /// `bytes` of uninitialised device memory (at least 1). Throws ExecutionError naming
  /// `what` when cudaMalloc fails.
  DeviceMem(size_t bytes, const std::string& what);
  void* get() const { return p_.get(); }
  template <typename T>
  T* as() const { return static_cast<T*>(p_.get()); }
  size_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<void> p_;
  size_t bytes_ = 0;
};

/// Page-locked host memory owned by a kernel: the staging buffer of a host input, so
/// its copy to the device runs at DMA speed (pageable copies are several times slower).
class PinnedMem {
 public:
  PinnedMem() = default;
  /// Throws ExecutionError naming `what` when cudaMallocHost fails.
  PinnedMem(size_t bytes, const std::string& what);
  void* get() const { return p_.get(); }

 private:
  std::shared_ptr<void> p_;
};

/// A CUDA event marking when work enqueued on a stream (a copy) has finished.
class CopyEvent {
 public:
  CopyEvent() = default;
  /// Throws ExecutionError naming `what` when cudaEventCreate fails.
  explicit CopyEvent(const std::string& what);
  /// Marks the work enqueued on `s` so far.
  void record(cudaStream_t s);
  /// Waits until the marked work has finished (at once if nothing was marked).
  void wait();

 private:
  std::shared_ptr<CUevent_st> e_;
  bool recorded_ = false;
};

/// A device copy of `bytes` host bytes, made once (weights, tables, qparams).
DeviceMem upload(const void* host, size_t bytes, const std::string& what);

/// The stream kernels of the calling thread run on (CUDA's per-thread default stream:
/// one stream per concurrent run).
cudaStream_t stream();

/// Asynchronous copies on `s` (host memory may be pageable).
void to_device(void* dst, const void* src, size_t bytes, cudaStream_t s);
void to_host(void* dst, const void* src, size_t bytes, cudaStream_t s);
void fill_zero(void* dst, size_t bytes, cudaStream_t s);
void device_copy(void* dst, const void* src, size_t bytes, cudaStream_t s);

/// Throws ExecutionError naming `what` if a launch failed (does not wait).
void check_launch(const std::string& what);

/// Waits for `s` and throws ExecutionError naming `what` for a launch or kernel error.
void finish(cudaStream_t s, const std::string& what);

}  // namespace qfx::runtime::cuda
