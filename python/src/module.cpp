// qfx._C: the C++ side of the qfx Python package (python/qfx), through the
// pybind11 that torch ships, so at::Tensor and torch.Tensor cross without copies.
#include <torch/version.h>

#include "bindings.h"
#include "qfx/version.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "qfx's C++ engine; use the qfx package, not this module";
  m.attr("__version__") = qfx::version();
  m.attr("torch_version") = TORCH_VERSION;  // the libtorch this extension was built against
  qfx::python::bind_errors(m);
  qfx::python::bind_ptq(m);
  qfx::python::bind_runtime(m);
  qfx::python::bind_qat(m);
}
