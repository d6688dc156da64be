// Zero-copy views between ATen tensors and the runtime's tensors (float32; int64 and
// int32 into the runtime).
#pragma once

#include <ATen/core/Tensor.h>

#include "qfx/runtime/tensor.h"

namespace qfx::quant {

/// A runtime tensor over `t`'s memory: int64 and int32 tensors keep their dtype
/// (token ids, masks), any other is converted to float32; made contiguous first if
/// it is not (that copy, or `t` itself, is kept alive by the returned tensor).
/// Shape as `t`'s.
runtime::Tensor runtime_view(const at::Tensor& t);

/// An ATen float32 tensor over `t`'s memory, no copy: valid only while `t`'s storage
/// lives (inside a `Model::run` callback: until it returns). `t` must be float32;
/// throws DataError naming its dtype otherwise. `.clone()` it to keep it.
at::Tensor aten_view(const runtime::Tensor& t);

}  // namespace qfx::quant
