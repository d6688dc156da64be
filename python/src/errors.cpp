// qfx::Error -> qfx.errors' class with the same exit code and message.
#include <exception>

#include "bindings.h"
#include "qfx/error.h"

namespace qfx::python {

void bind_errors(pybind11::module_& m) {
  (void)m;
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const qfx::Error& e) {
      const pybind11::object cls = pybind11::module_::import("qfx.errors").attr("error_class")(e.exit_code());
      PyErr_SetString(cls.ptr(), e.what());
    }
  });
}

}  // namespace qfx::python
