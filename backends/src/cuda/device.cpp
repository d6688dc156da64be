// The CUDA device: detection, owned device memory, copies, errors.
#include "device.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "qfx/error.h"

namespace qfx::runtime::cuda {
namespace {

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw ExecutionError("CUDA: " + what + ": " + cudaGetErrorString(e));
}

}  // namespace

const std::string& no_device_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      // Without a driver the runtime says the driver is too old; say what is missing.
      void* driver = dlopen("libcuda.so.1", RTLD_LAZY);
      if (!driver) return std::string("no NVIDIA driver: libcuda.so.1 is not installed");
      dlclose(driver);
      return std::string(cudaGetErrorString(e));
    }
    return n > 0 ? std::string() : std::string("no CUDA device");
  }();
  return reason;
}

DeviceMem::DeviceMem(size_t bytes, const std::string& what) : bytes_(bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "allocating " + std::to_string(bytes) + " bytes for " + what);
  p_ = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

PinnedMem::PinnedMem(size_t bytes, const std::string& what) {
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), "allocating " + std::to_string(bytes) + " page-locked bytes for " + what);
  p_ = std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
}

CopyEvent::CopyEvent(const std::string& what) {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "creating an event for " + what);
  e_ = std::shared_ptr<CUevent_st>(e, [](cudaEvent_t q) { cudaEventDestroy(q); });
}

void CopyEvent::record(cudaStream_t s) {
  check(cudaEventRecord(e_.get(), s), "recording an event");
  recorded_ = true;
}

void CopyEvent::wait() {
  if (recorded_) check(cudaEventSynchronize(e_.get()), "waiting for a copy");
}

DeviceMem upload(const void* host, size_t bytes, const std::string& what) {
  DeviceMem m(bytes, what);
  if (bytes) check(cudaMemcpy(m.get(), host, bytes, cudaMemcpyHostToDevice), "uploading " + what);
  return m;
}

cudaStream_t stream() { return cudaStreamPerThread; }

void to_device(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "copy to the device");
}

void to_host(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "copy to the host");
}

void fill_zero(void* dst, size_t bytes, cudaStream_t s) { check(cudaMemsetAsync(dst, 0, bytes, s), "memset"); }

void device_copy(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "device copy");
}

void check_launch(const std::string& what) { check(cudaPeekAtLastError(), "launching " + what); }

void finish(cudaStream_t s, const std::string& what) {
  check(cudaGetLastError(), "launching " + what);
  check(cudaStreamSynchronize(s), what);
}

}  // namespace qfx::runtime::cuda
