# oneDNN for the runtime's oneDNN kernels. Default: oneDNN 3.x from PyPI's
# onednn-cpu-gomp / onednn-devel-cpu-gomp wheels in the virtual environment that
# tools/install_deps.sh makes (.venv, or the prefix of QFX_PYTHON), else the
# system's (Debian's libdnnl-dev, oneDNN 2.6). -DQFX_ONEDNN_ROOT=DIR picks the oneDNN
# under DIR/include and DIR/lib, e.g. /usr for Debian's. The kernels build against
# the 2.x and the 3.x API (backends/src/onednn/common.h).
#
# PyPI's newest `onednn` wheel is not the default: it is built with the SYCL CPU
# runtime and TBB threading, so it needs Intel's DPC++ and OpenCL runtimes (about
# 600 MB of wheels) and runs its own threads beside the OpenMP threads that qfx's
# kernels and libtorch share. The gomp wheels are the newest CPU build with OpenMP.
set(QFX_ONEDNN_ROOT "" CACHE PATH "oneDNN's install prefix (include/, lib/); empty: .venv's, else the system's")
set(_qfx_dnnl_hints "")
if(QFX_ONEDNN_ROOT)
  set(_qfx_dnnl_find PATHS "${QFX_ONEDNN_ROOT}" NO_DEFAULT_PATH)
else()
  if(QFX_PYTHON)
    get_filename_component(_qfx_py_prefix "${QFX_PYTHON}" DIRECTORY)
    get_filename_component(_qfx_py_prefix "${_qfx_py_prefix}" DIRECTORY)
    list(APPEND _qfx_dnnl_hints "${_qfx_py_prefix}")
  endif()
  list(APPEND _qfx_dnnl_hints "${PROJECT_SOURCE_DIR}/.venv")
  set(_qfx_dnnl_find HINTS ${_qfx_dnnl_hints})
endif()
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp ${_qfx_dnnl_find} PATH_SUFFIXES include)
find_library(DNNL_LIBRARY NAMES dnnl ${_qfx_dnnl_find} PATH_SUFFIXES lib/${CMAKE_LIBRARY_ARCHITECTURE} lib lib64)
if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
  set(_qfx_where "")
  if(QFX_ONEDNN_ROOT)
    set(_qfx_where " under QFX_ONEDNN_ROOT=${QFX_ONEDNN_ROOT}")
  endif()
  message(FATAL_ERROR "qfx: oneDNN not found${_qfx_where}. Run tools/install_deps.sh (it installs "
                      "onednn-cpu-gomp into .venv and Debian's libdnnl-dev), or set -DQFX_ONEDNN_ROOT=DIR.")
endif()
file(STRINGS "${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _qfx_dnnl_v REGEX "#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3" QFX_ONEDNN_VERSION "${_qfx_dnnl_v}")
message(STATUS "qfx: oneDNN ${QFX_ONEDNN_VERSION}: ${DNNL_LIBRARY}")
add_library(qfx_dnnl INTERFACE)
target_include_directories(qfx_dnnl INTERFACE $<BUILD_INTERFACE:${DNNL_INCLUDE_DIR}>)
# Only qfx_runtime (a shared library) links oneDNN, privately: an installed qfx::
# target carries no path to it.
target_link_libraries(qfx_dnnl INTERFACE $<BUILD_INTERFACE:${DNNL_LIBRARY}>)
get_filename_component(_qfx_dnnl_real "${DNNL_LIBRARY}" REALPATH)
get_filename_component(QFX_ONEDNN_LIB_DIR "${_qfx_dnnl_real}" DIRECTORY)
# A oneDNN outside the system's library folders (the .venv wheel's) is installed
# into the prefix under its SONAME, so an installed qfx needs neither the source
# tree nor its virtual environment; a system oneDNN (Debian's) stays where the
# package manager put it and installed binaries find it by the usual search.
if(QFX_ONEDNN_LIB_DIR MATCHES "^/(usr/)?lib(64|/${CMAKE_LIBRARY_ARCHITECTURE})?$")
  set(_qfx_dnnl_bundle_default OFF)
else()
  set(_qfx_dnnl_bundle_default ON)
endif()
option(QFX_INSTALL_ONEDNN "Install the oneDNN library qfx links into the prefix" ${_qfx_dnnl_bundle_default})
string(REGEX MATCH "^[0-9]+" _qfx_dnnl_major "${QFX_ONEDNN_VERSION}")
set(QFX_ONEDNN_SONAME "libdnnl.so.${_qfx_dnnl_major}")
