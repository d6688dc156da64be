// Zero-copy views between ATen and runtime tensors.
#include "qfx/quant/runtime_tensor.h"

#include <ATen/ATen.h>

#include "qfx/error.h"

namespace qfx::quant {

runtime::Tensor runtime_view(const at::Tensor& t_in) {
  at::Tensor t = t_in.to(at::kFloat).contiguous();
  std::shared_ptr<uint8_t[]> storage(static_cast<uint8_t*>(t.data_ptr()), [t](uint8_t*) {});
  return runtime::Tensor(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), runtime::DType::kFloat32,
                         std::move(storage));
}

at::Tensor aten_view(const runtime::Tensor& t) {
  if (t.dtype() != runtime::DType::kFloat32)
    throw DataError(std::string("aten_view: expected a float32 tensor, got ") + runtime::dtype_name(t.dtype()));
  return at::from_blob(const_cast<void*>(t.raw()), t.shape(), at::kFloat);
}

}  // namespace qfx::quant
