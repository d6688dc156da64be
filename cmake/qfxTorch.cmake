# libtorch. By default the one inside the torch wheel of QFX_PYTHON (its
# share/cmake/Torch), so qfx links the libtorch its users' Python has. A user who
# sets Torch_DIR (or CMAKE_PREFIX_PATH) to another libtorch gets that one, e.g.
# Debian's 1.13: -DTorch_DIR=/usr/lib/x86_64-linux-gnu/cmake/Torch.
if(NOT Torch_DIR)
  execute_process(COMMAND "${QFX_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE _qfx_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_qfx_torch_prefix)
    set(Torch_DIR "${_qfx_torch_prefix}/Torch" CACHE PATH "libtorch's CMake config (default: the torch wheel's)")
  endif()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/qfxTorchTarget.cmake)
qfx_pin_caffe2_to_torch()
find_package(Torch REQUIRED)
qfx_make_torch_cpu_target(qfx::torch_cpu)
message(STATUS "qfx: libtorch ${Torch_VERSION} from ${Torch_DIR} (CPU libraries)")
# Installed binaries and libraries find their own libraries ($ORIGIN/../lib) and the
# libtorch they were linked with (e.g. the torch wheel's lib folder, outside the
# prefix) without LD_LIBRARY_PATH, whatever other libtorch the system has.
get_target_property(_qfx_torch_cpu_lib torch_cpu IMPORTED_LOCATION)
if(NOT _qfx_torch_cpu_lib)
  get_target_property(_qfx_torch_cpu_lib torch_cpu LOCATION)
endif()
get_filename_component(QFX_TORCH_LIB_DIR "${_qfx_torch_cpu_lib}" DIRECTORY)
set(CMAKE_INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR};${QFX_TORCH_LIB_DIR}")
