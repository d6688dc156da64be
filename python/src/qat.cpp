// _C.QatModel: a prepare_qat_fx GraphModule whose parameters and buffers Python
// trains in place (the same at::Tensor objects, no copies), and its conversion.
#include <pybind11/stl.h>

#include <filesystem>

#include "bindings.h"
#include "qfx/error.h"
#include "qfx/fx/graph_module.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/qconfig.h"

namespace qfx::python {
namespace py = pybind11;
namespace {

struct QatModel {
  std::shared_ptr<fx::GraphModule> gm;
  quant::BackendConfig backend;
  std::vector<std::string> warnings;
};

QatModel prepare(const std::string& model_path, const std::string& backend, const std::string& qconfig_file,
                 const std::vector<std::vector<int64_t>>& input_shapes) {
  fx::TracerOptions opts;
  opts.input_shapes = input_shapes;
  QatModel m{fx::trace_file(model_path, opts), quant::BackendConfig::resolve(backend), {}};
  m.gm->eval();
  const quant::QConfigMapping mapping =
      qconfig_file.empty() ? quant::QConfigMapping::default_mapping() : quant::QConfigMapping::load(qconfig_file);
  m.warnings = quant::prepare_qat_fx(*m.gm, mapping, m.backend).warnings;
  m.gm->train(true);
  return m;
}

py::object to_python(const c10::IValue& v) {
  if (v.isTensor()) return py::cast(v.toTensor());
  std::vector<c10::IValue> items;
  if (v.isTuple()) items = v.toTupleRef().elements().vec();
  else if (v.isList()) items = v.toListRef().vec();
  else throw ExecutionError("QatModel.forward: the graph returned a " + v.tagKind() + ", not tensors");
  py::tuple t(items.size());
  for (size_t k = 0; k < items.size(); ++k) t[k] = to_python(items[k]);
  return std::move(t);
}

py::object forward(QatModel& m, const std::vector<at::Tensor>& inputs) {
  c10::IValue out;
  {
    py::gil_scoped_release released;
    out = m.gm->forward(std::vector<c10::IValue>(inputs.begin(), inputs.end()));
  }
  return to_python(out);
}

template <typename Dict>
std::vector<std::pair<std::string, at::Tensor>> items(const Dict& d) {
  std::vector<std::pair<std::string, at::Tensor>> v;
  for (const auto& kv : d) v.emplace_back(kv.key(), kv.value());
  return v;
}

quant::QuantState quant_state(const std::string& s) {
  if (s == "calibration") return quant::QuantState::kCalibration;
  if (s == "fake_quant") return quant::QuantState::kFakeQuant;
  if (s == "float") return quant::QuantState::kFloat;
  throw ArgumentError("QatModule.set_quant_state: '" + s + "' is not one of calibration, fake_quant, float");
}

// convert_fx + export_onnx (opset 14, the target's arithmetic carried) + encodings.json
// into `dir`; the prepared model is not modified and stays in the mode it was in.
py::dict convert(QatModel& m, const std::string& dir, const std::vector<std::vector<int64_t>>& input_shapes) {
  std::filesystem::create_directories(dir);
  const std::string onnx = (std::filesystem::path(dir) / "model_int8.onnx").string();
  const std::string enc = (std::filesystem::path(dir) / "encodings.json").string();
  const bool was_training = m.gm->is_training();
  quant::ExportResult er;
  {
    py::gil_scoped_release released;
    m.gm->eval();
    auto converted = quant::convert_fx(*m.gm);
    quant::ExportOptions o;
    o.input_shapes = input_shapes;
    o.opset = 14;
    er = quant::export_onnx(*converted, onnx, o);
    quant::write_encodings(enc, er, quant::graph_hash(*m.gm), m.backend.name);
    m.gm->train(was_training);
  }
  py::dict d;
  d["model_int8"] = onnx;
  d["encodings"] = enc;
  d["float_ops"] = er.float_ops;
  return d;
}

}  // namespace

void bind_qat(py::module_& m) {
  py::class_<QatModel>(m, "QatModel")
      .def(py::init(&prepare), py::arg("model_path"), py::arg("backend"), py::arg("qconfig_file"), py::arg("input_shapes"))
      .def_readonly("warnings", &QatModel::warnings)
      .def("named_parameters", [](QatModel& q) { return items(q.gm->named_parameters(true)); })
      .def("named_buffers", [](QatModel& q) { return items(q.gm->named_buffers(true)); })
      .def("forward", &forward, py::arg("inputs"))
      .def("train", [](QatModel& q, bool on) { q.gm->train(on); }, py::arg("on"))
      .def("to", [](QatModel& q, const std::string& device) { q.gm->to(torch::Device(device)); }, py::arg("device"))
      .def("freeze_bn_stats", [](QatModel& q) { quant::freeze_bn_stats(*q.gm); })
      .def("enable_observer", [](QatModel& q, bool on) { quant::enable_observer(*q.gm, on); }, py::arg("on"))
      .def("enable_fake_quant", [](QatModel& q, bool on) { quant::enable_fake_quant(*q.gm, on); }, py::arg("on"))
      .def("set_quant_state", [](QatModel& q, const std::string& s) { return quant::set_quant_state(*q.gm, quant_state(s)); },
           py::arg("state"))
      .def("code", [](QatModel& q) { return q.gm->code(); })
      .def("convert", &convert, py::arg("dir"), py::arg("input_shapes"));
}

}  // namespace qfx::python
