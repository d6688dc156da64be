// The `model:` section's inputs: model.input_shape (one float input) or
// model.inputs (several, or integer inputs), checked against an ONNX model's own.
#include <algorithm>
#include <filesystem>

#include "model_inputs.h"
#include "qfx/fx/exported_program.h"
#include "qfx/fx/onnx_model.h"

namespace qfx::quant {
namespace {

using namespace yaml;

std::string dims_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + (s[i] < 0 ? std::string("?") : std::to_string(s[i]));
  return t + "]";
}

std::vector<int64_t> shape_of(const std::string& path, const YAML::Node& n, const std::string& what) {
  if (!n.IsSequence()) bad(path, n, what + " must be a list, e.g. [-1, 1, 28, 28]");
  std::vector<int64_t> s;
  for (const auto& d : n) s.push_back(as_int(path, d, what));
  return s;
}

// `given` (from the config) against what the ONNX model declares: same rank, and
// every static dim of the model past the batch equal.
void check_fits(const std::string& path, const YAML::Node& at, const std::string& what, const std::vector<int64_t>& given,
                const fx::OnnxInput& in, const std::string& model) {
  if (in.shape.empty()) return;  // the model declares no shape (rank 0 is read as none): the config's stands
  bool fits = given.size() == in.shape.size();
  for (size_t d = 1; fits && d < in.shape.size(); ++d) fits = in.shape[d] < 0 || given[d] == in.shape[d];
  if (!fits)
    bad(path, at, what + " " + dims_text(given) + " does not fit " + model + "'s input '" + in.name + "' " + dims_text(in.shape) +
                      " (leave it out, or --set model.input_shape=null, to take the model's)");
}

// An ONNX input's shape as qfx feeds it: the batch dynamic, every other dim static.
std::vector<int64_t> onnx_shape(const std::string& path, const YAML::Node& at, const fx::OnnxInput& in, const std::string& model) {
  if (in.shape.empty())
    bad(path, at, model + ": input '" + in.name + "' declares no shape; give it in the config (model.input_shape, e.g. "
                      "[-1, 3, 224, 224] with -1 for the batch, or model.inputs." + in.name + ".shape)");
  if (!in.shape.empty() && in.shape[0] > 0)
    bad(path, at, model + ": input '" + in.name + "' " + dims_text(in.shape) + " has a static batch of " + std::to_string(in.shape[0]) +
                      "; qfx runs batches of any size: export the model with a dynamic batch (torch.onnx.export: dynamic_shapes or dynamic_axes)");
  std::vector<int64_t> s = in.shape;
  if (!s.empty()) s[0] = -1;
  for (size_t d = 1; d < s.size(); ++d)
    if (s[d] < 0)
      bad(path, at, model + ": input '" + in.name + "' " + dims_text(in.shape) +
                        " has dynamic dims past the batch; give its shape (model.input_shape, or model.inputs." + in.name + ".shape)");
  return s;
}

// model.inputs: {NAME: {shape: [...], dtype: float32 | int64 | int32}, ...} in the
// model's input order. `onnx` holds the ONNX model's own inputs (empty otherwise).
std::vector<InputSpec> read_inputs(const std::string& path, const YAML::Node& n, const std::vector<fx::OnnxInput>& onnx) {
  if (!n.IsMap() || n.size() == 0)
    bad(path, n, "model.inputs must be a mapping {input_ids: {shape: [-1, 128], dtype: int64}, ...}");
  std::vector<InputSpec> out;
  for (const auto& kv : n) {
    InputSpec in;
    in.name = key_name(path, kv.first, "model.inputs");
    const std::string what = "model.inputs." + in.name;
    if (!kv.second.IsMap()) bad(path, kv.second, what + " must be a mapping {shape: [...], dtype: ...}");
    check_keys(path, kv.second, what, {"shape", "dtype"});
    if (auto d = kv.second["dtype"]) in.dtype = as_choice(path, d, what + ".dtype", {"float32", "int64", "int32"});
    if (auto s = kv.second["shape"]) in.shape = shape_of(path, s, what + ".shape");
    else if (onnx.empty()) bad(path, kv.second, what + ".shape is required, e.g. [-1, 128]");
    out.push_back(in);
  }
  return out;
}

// An ONNX model's inputs as qfx feeds them, `given` (model.inputs) fixing shapes.
std::vector<InputSpec> onnx_inputs(const std::string& path, const YAML::Node& m, const std::vector<fx::OnnxInput>& ins,
                                   const std::vector<InputSpec>& given, const std::string& model) {
  for (const auto& g : given) {
    bool known = false;
    for (const auto& in : ins) known |= in.name == g.name;
    if (!known) bad(path, m["inputs"][g.name], "model.inputs." + g.name + ": " + model + " has no input of that name");
  }
  std::vector<InputSpec> out;
  for (const fx::OnnxInput& in : ins) {
    if (in.dtype != "float32" && in.dtype != "int64" && in.dtype != "int32")
      bad(path, m["path"], model + ": input '" + in.name + "' is " + in.dtype + "; qfx feeds float32, int64 and int32 inputs");
    InputSpec s{in.name, {}, in.dtype};
    for (const auto& g : given) {
      if (g.name != in.name) continue;
      const YAML::Node at = m["inputs"][g.name];
      if (at["dtype"] && g.dtype != in.dtype)
        bad(path, at["dtype"], "model.inputs." + g.name + ".dtype is " + g.dtype + "; " + model + " declares " + in.dtype);
      if (!g.shape.empty()) {
        check_fits(path, at["shape"], "model.inputs." + g.name + ".shape", g.shape, in, model);
        s.shape = g.shape;
      }
    }
    if (s.shape.empty()) s.shape = onnx_shape(path, m["inputs"] ? m["inputs"] : m["path"], in, model);
    out.push_back(s);
  }
  return out;
}

// model.inputs of a torch.export program, in the program's input order (a mapping's
// order is the writer's: YAML dumpers sort keys); every name must be one of its
// inputs and every input named. Other models (TorchScript) take the order given.
std::vector<InputSpec> program_order(const std::string& path, const YAML::Node& m, const std::vector<InputSpec>& given,
                                     const std::string& model) {
  if (!std::filesystem::exists(model) || !fx::is_exported_program(model)) return given;
  const std::vector<std::string> names = fx::exported_program_inputs(model);
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  std::vector<InputSpec> out;
  for (const auto& g : given)
    if (std::find(names.begin(), names.end(), g.name) == names.end())
      bad(path, m["inputs"][g.name], "model.inputs." + g.name + ": " + model + " has no input of that name (its inputs: " + list + ")");
  for (const auto& n : names) {
    auto it = std::find_if(given.begin(), given.end(), [&](const InputSpec& g) { return g.name == n; });
    if (it == given.end()) bad(path, m["inputs"], "model.inputs names no input '" + n + "' of " + model + " (its inputs: " + list + ")");
    out.push_back(*it);
  }
  return out;
}

}  // namespace

void read_model_inputs(const std::string& path, const YAML::Node& m, ModelConfig* model) {
  // model.input_shape: null counts as absent (--set model.input_shape=null clears a
  // shape a base config gives, so that an ONNX model's own is taken).
  const YAML::Node shape = m["input_shape"];
  const bool has_shape = shape && !shape.IsNull();
  if (m["inputs"] && has_shape)
    bad(path, m["inputs"], "give model.input_shape (a model with one float input) or model.inputs, not both");
  const bool onnx = fx::is_onnx_model(model->path) && std::filesystem::exists(model->path);
  const std::vector<fx::OnnxInput> ins = onnx ? fx::onnx_model_inputs(model->path) : std::vector<fx::OnnxInput>{};
  if (has_shape) model->input_shape = shape_of(path, shape, "model.input_shape");
  const std::vector<InputSpec> given = m["inputs"] ? read_inputs(path, m["inputs"], ins) : std::vector<InputSpec>{};
  if (!onnx) {
    if (!given.empty()) model->inputs = program_order(path, m, given, model->path);
    else if (has_shape) model->inputs = {{"input", model->input_shape, "float32"}};
    else bad(path, m, "model.input_shape is required, e.g. [-1, 1, 28, 28] (or model.inputs for several inputs)");
  } else if (given.empty() && ins.size() == 1 && ins[0].dtype == "float32") {  // one float input, fed as "input"
    if (!ins[0].shape.empty() && ins[0].shape[0] > 0) onnx_shape(path, m["path"], ins[0], model->path);  // a static batch first
    if (!model->input_shape.empty()) check_fits(path, shape, "model.input_shape", model->input_shape, ins[0], model->path);
    else model->input_shape = onnx_shape(path, m, ins[0], model->path);
    model->inputs = {{"input", model->input_shape, "float32"}};
  } else {
    if (has_shape)
      bad(path, shape, model->path + " has " + std::to_string(ins.size()) + " input(s) of which not all are one float32 tensor: "
                                  "give their shapes as model.inputs.NAME.shape");
    model->inputs = onnx_inputs(path, m, ins, given, model->path);
  }
  model->input_shape = model->inputs[0].shape;
}

}  // namespace qfx::quant
