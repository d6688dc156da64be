// _C.ptq: quant::ptq with progress reported to Python callables.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "qfx/quant/job_config_text.h"
#include "qfx/quant/pipeline.h"

namespace qfx::python {
namespace py = pybind11;
namespace {

using Progress = std::function<void(const std::string&, int64_t, int64_t, const std::string&)>;
using Info = std::function<void(const std::string&)>;

// The hooks run on the calling thread, which holds no GIL while ptq runs.
quant::PipelineHooks hooks_for(const Progress& progress, const Info& info) {
  quant::PipelineHooks h;
  if (progress)
    h.progress = [progress](const std::string& stage, int64_t done, int64_t total, const std::string& extra) {
      py::gil_scoped_acquire gil;
      progress(stage, done, total, extra);
    };
  if (info)
    h.info = [info](const std::string& line) {
      py::gil_scoped_acquire gil;
      info(line);
    };
  return h;
}

py::dict run(const std::string& path, const std::string& yaml, const std::vector<std::string>& overrides,
             const Progress& progress, const Info& info) {
  const quant::JobConfig cfg = yaml.empty() ? quant::load_job_config(path, overrides)
                                            : quant::load_job_config_text(yaml, path, overrides);
  quant::PtqResult r;
  {
    py::gil_scoped_release released;
    r = quant::ptq(cfg, hooks_for(progress, info));
  }
  py::dict d;
  d["output_dir"] = r.output_dir;
  d["outputs"] = r.outputs;
  d["seconds"] = r.seconds;
  d["reference_images"] = r.evaluation.reference_images;
  d["reference_identical"] = r.evaluation.reference_identical;
  d["reference_exact_expected"] = r.evaluation.reference_exact_expected;
  return d;
}

}  // namespace

void bind_ptq(py::module_& m) {
  m.def("ptq", &run, py::arg("path"), py::arg("yaml"), py::arg("overrides"), py::arg("progress"), py::arg("info"),
        "quant::ptq on the config file `path`, or on YAML text `yaml` named `path`");
  m.def("find_config", &quant::find_config, py::arg("relative"), "A config qfx ships (\"ptq/default.yaml\")");
}

}  // namespace qfx::python
