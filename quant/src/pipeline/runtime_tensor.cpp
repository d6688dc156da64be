// Zero-copy views between ATen and runtime tensors.
#include "qfx/quant/runtime_tensor.h"

#include <ATen/ATen.h>

#include "qfx/error.h"

namespace qfx::quant {

runtime::Tensor runtime_view(const at::Tensor& t_in) {
  const at::ScalarType st = t_in.scalar_type();
  const bool integer = st == at::kLong || st == at::kInt;
  at::Tensor t = (integer ? t_in : t_in.to(at::kFloat)).contiguous();
  std::shared_ptr<uint8_t[]> storage(static_cast<uint8_t*>(t.data_ptr()), [t](uint8_t*) {});
  const runtime::DType dt = st == at::kLong ? runtime::DType::kInt64 : st == at::kInt ? runtime::DType::kInt32 : runtime::DType::kFloat32;
  return runtime::Tensor(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), dt, std::move(storage));
}

at::Tensor aten_view(const runtime::Tensor& t) {
  if (t.dtype() != runtime::DType::kFloat32)
    throw DataError(std::string("aten_view: expected a float32 tensor, got ") + runtime::dtype_name(t.dtype()));
  return at::from_blob(const_cast<void*>(t.raw()), t.shape(), at::kFloat);
}

}  // namespace qfx::quant
