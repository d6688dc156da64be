// The CUDA entry points of a build without CUDA (qfx/runtime/cuda.h).
#include "qfx/error.h"
#include "qfx/runtime/cuda.h"

namespace qfx::runtime {

bool cuda_built() { return false; }

std::string cuda_unavailable_reason() {
  return "qfx was built without CUDA (configure with nvcc on the PATH and -DQFX_WITH_CUDA=ON)";
}

void cuda_lattice_histogram(const float*, int64_t, const hd::HistogramLattice&, int64_t, double*, float*, float*, bool*,
                            bool) {
  throw ExecutionError("cuda_lattice_histogram: " + cuda_unavailable_reason());
}

}  // namespace qfx::runtime
