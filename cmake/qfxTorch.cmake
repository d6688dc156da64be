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
# The PyPI wheel is CUDA-enabled; its config then looks for the CUDA toolkit and
# adds torch_cuda to TORCH_LIBRARIES. qfx's CPU code needs none of it: link the
# CPU libraries only, so a build never depends on the toolkit's version matching
# the wheel's, and runs on machines without a GPU.
find_package(Torch REQUIRED)
set(QFX_TORCH_LIBS torch_cpu c10)
if(TARGET torch_cpu_library)
  list(APPEND QFX_TORCH_LIBS torch_cpu_library)
endif()
message(STATUS "qfx: libtorch ${Torch_VERSION} from ${Torch_DIR}")
