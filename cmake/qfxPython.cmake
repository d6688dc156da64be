# The Python interpreter that exports the test fixtures (torch, torchvision, onnx)
# and runs the independent checks (onnxruntime, numpy). Default: the virtual
# environment that tools/install_deps.sh creates in the source tree (.venv), else
# python3 on PATH; under pip, the interpreter pip runs. Override with
# -DQFX_PYTHON=/path/to/python.
# Under pip (scikit-build-core sets SKBUILD): the interpreter pip runs, whose torch
# the package is built against.
if(NOT QFX_PYTHON AND SKBUILD AND Python_EXECUTABLE)
  set(QFX_PYTHON "${Python_EXECUTABLE}" CACHE FILEPATH "Python with torch (the one pip installs qfx into)")
endif()
if(NOT QFX_PYTHON)
  if(EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
    set(_qfx_py "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  else()
    find_program(_qfx_py NAMES python3 REQUIRED)
  endif()
  set(QFX_PYTHON "${_qfx_py}" CACHE FILEPATH "Python with torch, torchvision, onnx, onnxruntime (fixtures and checks)")
endif()
execute_process(COMMAND "${QFX_PYTHON}" -c "import torch, sys; print(torch.__version__)"
                OUTPUT_VARIABLE QFX_PYTHON_TORCH_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE _qfx_py_rc ERROR_QUIET)
if(NOT _qfx_py_rc EQUAL 0)
  message(FATAL_ERROR "qfx: ${QFX_PYTHON} cannot import torch. Run tools/install_deps.sh (it creates .venv "
                      "from requirements.txt), or point -DQFX_PYTHON at an interpreter that has torch.")
endif()
message(STATUS "qfx: Python for fixtures and checks: ${QFX_PYTHON} (torch ${QFX_PYTHON_TORCH_VERSION})")
