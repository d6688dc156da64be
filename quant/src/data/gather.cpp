// Dataset::batch and Dataset::gather: a batch's samples read on libtorch's threads
// where the reader allows it (Dataset::concurrent_reads). Compiled with OpenMP,
// which at::parallel_for needs to use more than one thread.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "qfx/error.h"
#include "qfx/quant/dataset.h"

namespace qfx::quant {

at::Tensor Dataset::batch(int64_t begin, int64_t end) {
  std::vector<int64_t> positions;
  for (int64_t i = begin; i < std::min(end, size()); ++i) positions.push_back(i);
  return gather(positions);
}

at::Tensor Dataset::gather(const std::vector<int64_t>& positions) {
  if (num_inputs() != 1)
    throw ConfigError(source_ + ": the model has " + std::to_string(num_inputs()) +
                      " inputs, and this step feeds models with one input");
  std::vector<int64_t> shape{static_cast<int64_t>(positions.size())};
  shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
  at::Tensor out = at::empty(shape, dtype_);
  const int64_t n = c10::multiply_integers(sample_shape_);
  for (int64_t p : positions)
    if (p < 0 || p >= size()) throw DataError(source_ + ": sample " + std::to_string(p) + " out of range");
  auto* dst = static_cast<char*>(out.data_ptr());
  const int64_t bytes = n * static_cast<int64_t>(out.element_size());
  const int64_t count = static_cast<int64_t>(positions.size());
  auto read_one = [&](int64_t i) { read_typed(index_[static_cast<size_t>(positions[static_cast<size_t>(i)])], dst + i * bytes); };
  if (!concurrent_reads() || count < 2) {
    for (int64_t i = 0; i < count; ++i) read_one(i);
    return out;
  }
  // The error of the first failing sample (in batch order) is the one raised, as
  // reading them one by one would raise it.
  std::vector<std::exception_ptr> errors(positions.size());
  at::parallel_for(0, count, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      try {
        read_one(i);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    }
  });
  for (const auto& err : errors)
    if (err) std::rethrow_exception(err);
  return out;
}

}  // namespace qfx::quant
