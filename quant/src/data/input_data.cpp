// The data of a model with several inputs: one source per input, read in step.
#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "qfx/error.h"
#include "qfx/quant/data.h"
#include "qfx/quant/dataset.h"

namespace qfx::quant {
namespace {

at::ScalarType scalar_type(const InputSpec& in) {
  if (in.dtype == "float32") return at::kFloat;
  if (in.dtype == "int64" || in.dtype == "int32") return at::kLong;
  throw ConfigError("model input '" + in.name + "' is " + in.dtype + "; qfx feeds float32, int64 and int32 inputs");
}

// A source's samples must come as its input takes them: float data for a float
// input, integers for an integer input (an int32 input is fed int64 and the
// runtime reads it as the model declares).
void check_dtype(const Dataset& d, const InputSpec& in) {
  const at::ScalarType want = scalar_type(in);
  if (d.dtype() == want) return;
  throw DataError(d.source() + ": samples are " + std::string(d.dtype() == at::kFloat ? "float32" : "int64") +
                  "; model input '" + in.name + "' takes " + in.dtype +
                  (want == at::kLong ? " (save the token ids / indices as an integer .npy array)" : ""));
}

class MultiInputDataset : public Dataset {
 public:
  MultiInputDataset(std::vector<std::unique_ptr<Dataset>> parts, at::Tensor labels) : parts_(std::move(parts)) {
    for (const auto& p : parts_) source_ += (source_.empty() ? "" : ", ") + p->source();
    for (const auto& p : parts_)
      if (p->size() != parts_[0]->size())
        throw DataError(source_ + ": the inputs' sources hold different numbers of samples (" + counts() +
                        "); sample i of every input belongs to one example");
    index_.resize(static_cast<size_t>(parts_[0]->size()));
    labels_ = std::move(labels);
  }
  size_t num_inputs() const override { return parts_.size(); }
  std::vector<at::Tensor> batch_inputs(int64_t begin, int64_t end) override {
    std::vector<at::Tensor> out;
    for (auto& p : parts_) out.push_back(p->batch(begin, end));
    return out;
  }
  std::vector<at::Tensor> gather_inputs(const std::vector<int64_t>& positions) override {
    std::vector<at::Tensor> out;
    for (auto& p : parts_) out.push_back(p->gather(positions));
    return out;
  }

 protected:
  void read(int64_t, float*) override { throw ConfigError(source_ + ": several inputs are read with batch_inputs"); }

 private:
  std::string counts() const {
    std::string c;
    for (const auto& p : parts_) c += (c.empty() ? "" : ", ") + std::to_string(p->size()) + " in " + p->source();
    return c;
  }
  std::vector<std::unique_ptr<Dataset>> parts_;
};

}  // namespace

std::unique_ptr<Dataset> open_inputs(const DataSpec& spec, const std::vector<InputSpec>& inputs, int64_t limit,
                                     int64_t seed) {
  if (!spec.per_input()) {
    if (inputs.size() != 1) {
      std::string names;
      for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
      throw ConfigError(spec.images + ": the model has " + std::to_string(inputs.size()) + " inputs (" + names +
                        "): give one data source per input, by name");
    }
    auto d = open_dataset(spec, inputs[0].shape, limit, seed);
    check_dtype(*d, inputs[0]);
    return d;
  }
  for (const auto& s : spec.inputs)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const InputSpec& in) { return in.name == s.input; }))
      throw ConfigError("data source '" + s.input + "' names no input of the model");
  std::vector<std::unique_ptr<Dataset>> parts;
  at::Tensor labels;
  for (const InputSpec& in : inputs) {
    auto it = std::find_if(spec.inputs.begin(), spec.inputs.end(), [&](const DataSpec& s) { return s.input == in.name; });
    if (it == spec.inputs.end()) throw ConfigError("model input '" + in.name + "' has no data source");
    parts.push_back(open_dataset(*it, in.shape, limit, seed));
    check_dtype(*parts.back(), in);
    if (parts.back()->labels().defined()) {
      if (labels.defined())
        throw ConfigError("labels are given for several inputs; give them once");
      labels = parts.back()->labels();
    }
  }
  return std::make_unique<MultiInputDataset>(std::move(parts), labels);
}

}  // namespace qfx::quant
