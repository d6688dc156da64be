// The pieces of qfx's Python extension (qfx._C), one function per file.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace qfx::python {

/// qfx.errors' classes for qfx's C++ errors: a qfx::Error raised in C++ reaches
/// Python as the class whose `exit_code` equals the error's (qfx.ConfigError for a
/// ConfigError, ...), with the same message.
void bind_errors(pybind11::module_& m);

/// `_C.ptq(path, yaml, overrides, progress, info)`: quant::ptq on a config file
/// (yaml empty) or on YAML text named `path`; returns the files written and the
/// reference check's counts.
void bind_ptq(pybind11::module_& m);

/// `_C.RuntimeModel`: runtime::Model over torch tensors.
void bind_runtime(pybind11::module_& m);

/// `_C.QatModel`: a prepare_qat_fx GraphModule trained from Python, and its conversion.
void bind_qat(pybind11::module_& m);

}  // namespace qfx::python
