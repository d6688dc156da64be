// The `model:` section: the float model, its inputs, the operator libraries it calls.
#include "../model_inputs.h"
#include "sections.h"

namespace qfx::quant::sections {

using namespace yaml;

const KeyTable& model_keys() {
  static const KeyTable t{"model", {
      {"path", KeyType::kPath, {}, {}, "required", "a TorchScript file, a torch.export program (.pt2) or a float ONNX model"},
      {"input_shape", KeyType::kList, {}, {}, "an ONNX model's", "[-1, C, H, W] of a model with one float32 input (-1: dynamic batch)"},
      {"inputs", KeyType::kMapping, {}, {}, "an ONNX model's", "{NAME: {shape, dtype}, ...}, bound by name (a TorchScript model's in forward's argument order)"},
      {"libraries", KeyType::kPaths, {}, {}, "[]", "operator libraries (.so) the TorchScript calls"},
  }};
  return t;
}

void read_model(const SectionReader& m, JobConfig* c) {
  const std::string& path = m.path();
  if (const YAML::Node libs = m["libraries"]) {
    if (!libs.IsSequence()) bad(path, libs, "model.libraries must be a list of operator libraries: [lib.so]");
    for (const auto& l : libs) c->tracer.options.libraries.push_back(read_path(path, l, "model.libraries", m.base()));
  }
  m.read("path", &c->model.path);
  read_model_inputs(path, m.node(), &c->model);
  for (const InputSpec& in : c->model.inputs) {  // shape specialisation while tracing
    c->tracer.options.input_shapes.push_back(in.shape);
    c->tracer.options.input_dtypes.push_back(in.dtype);
  }
}

}  // namespace qfx::quant::sections
