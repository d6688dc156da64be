// _C.RuntimeModel: runtime::Model with torch tensors in and out (no copies for
// contiguous CPU float32 / int32 / int64 inputs, none for outputs).
#include <ATen/ATen.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "qfx/error.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/runtime/model.h"

namespace qfx::python {
namespace py = pybind11;
namespace {

at::ScalarType scalar_type(runtime::DType t) {
  switch (t) {
    case runtime::DType::kFloat32: return at::kFloat;
    case runtime::DType::kInt8: return at::kChar;
    case runtime::DType::kUInt8: return at::kByte;
    case runtime::DType::kInt32: return at::kInt;
    case runtime::DType::kInt64: return at::kLong;
    case runtime::DType::kBool: return at::kBool;
    case runtime::DType::kInt16: return at::kShort;
  }
  throw InternalError("qfx._C: a runtime dtype without a torch dtype");
}

// The runtime tensor's bytes as an at::Tensor; the copy of `t` in the deleter
// keeps them alive as long as the torch tensor.
at::Tensor to_torch(const runtime::Tensor& t) {
  auto* data = const_cast<void*>(t.raw());
  return at::from_blob(data, t.shape(), [t](void*) {}, at::TensorOptions().dtype(scalar_type(t.dtype())));
}

runtime::Tensor from_torch(const std::string& name, const at::Tensor& t) {
  if (!t.device().is_cpu())
    throw DataError("input '" + name + "' is on " + t.device().str() + "; the runtime reads CPU tensors (.cpu() it)");
  return quant::runtime_view(t.detach());
}

std::map<std::string, at::Tensor> run(const runtime::Model& model, const std::map<std::string, at::Tensor>& inputs) {
  std::map<std::string, runtime::Tensor> in;
  for (const auto& [name, t] : inputs) in.emplace(name, from_torch(name, t));
  std::map<std::string, runtime::Tensor> out;
  {
    py::gil_scoped_release released;
    out = model.run(in);
  }
  std::map<std::string, at::Tensor> result;
  for (const auto& [name, t] : out) result.emplace(name, to_torch(t));
  return result;
}

py::list infos(const std::vector<runtime::TensorInfo>& v) {
  py::list l;
  for (const auto& i : v) l.append(py::make_tuple(i.name, runtime::dtype_name(i.dtype), i.shape));
  return l;
}

py::list kernels(const runtime::Model& model) {
  py::list l;
  for (const auto& k : model.kernel_report()) {
    py::list declined;
    for (const auto& d : k.declined) declined.append(py::make_tuple(d.impl, d.reason));
    py::dict e;
    e["node"] = k.node;
    e["op"] = k.op;
    e["backend"] = k.backend;
    e["impl"] = k.impl;
    e["dtype"] = k.dtype;
    e["declined"] = declined;
    e["folded"] = k.folded;
    l.append(e);
  }
  return l;
}

runtime::TapKind tap_kind(const std::string& kind) {
  if (kind == "minmax") return runtime::TapKind::kMinMax;
  if (kind == "per_channel_minmax") return runtime::TapKind::kPerChannelMinMax;
  if (kind == "histogram") return runtime::TapKind::kHistogram;
  throw ArgumentError("Model.set_taps: kind '" + kind + "' is not one of minmax, per_channel_minmax, histogram");
}

py::dict taps(const runtime::Model& model) {
  py::dict d;
  for (const auto& [name, s] : model.taps()) {
    py::dict e;
    e["min"] = s.min;
    e["max"] = s.max;
    e["count"] = s.count;
    if (!s.channel_min.empty()) {
      e["channel_min"] = s.channel_min;
      e["channel_max"] = s.channel_max;
    }
    if (!s.histogram.empty()) {
      e["histogram"] = s.histogram;
      e["histogram_lo"] = s.histogram_lo;
      e["bin_width"] = s.bin_width;
    }
    d[py::str(name)] = e;
  }
  return d;
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<runtime::Model>(m, "RuntimeModel")
      .def(py::init([](const std::string& path, const std::string& backend) {
             return runtime::Model::load(path, runtime::ModelOptions(backend));
           }),
           py::arg("path"), py::arg("backend"))
      .def_static("from_bytes",
                  [](const py::bytes& data, const std::string& backend) {
                    return runtime::Model::load_from_string(std::string(data), runtime::ModelOptions(backend), "<ONNX bytes>");
                  },
                  py::arg("data"), py::arg("backend"))
      .def("run", &run, py::arg("inputs"))
      .def("inputs", [](const runtime::Model& mdl) { return infos(mdl.inputs()); })
      .def("outputs", [](const runtime::Model& mdl) { return infos(mdl.outputs()); })
      .def("backend", &runtime::Model::backend)
      .def("int8_ops", &runtime::Model::int8_ops)
      .def("total_ops", &runtime::Model::total_ops)
      .def("float_fallbacks", &runtime::Model::float_fallbacks)
      .def("kernel_report", &kernels)
      .def("value_names", &runtime::Model::value_names)
      .def("set_taps",
           [](runtime::Model& mdl, const std::vector<std::string>& names, const std::string& kind, int64_t bins) {
             runtime::TapOptions o;
             o.bins = bins;
             mdl.set_taps(names, tap_kind(kind), o);
           },
           py::arg("names"), py::arg("kind"), py::arg("bins"))
      .def("taps", &taps)
      .def("reset_taps", &runtime::Model::reset_taps)
      .def("clear_taps", &runtime::Model::clear_taps);
}

}  // namespace qfx::python
