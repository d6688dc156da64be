# qfx_make_torch_cpu_target(NAME): an interface target NAME with libtorch's CPU
# libraries (torch_cpu, c10) and the `torch` target's usage requirements (include
# folders, C++ standard, ABI flags), without torch_cuda. The PyPI wheel is
# CUDA-enabled: its `torch` target brings libtorch_cuda, whose NCCL and CUDA
# dependencies would then have to match the CUDA toolkit of the machine that links.
# qfx computes on the CPU (its CUDA code links the toolkit on its own), so it links
# the CPU libraries only; libtorch_cpu finds the CUDA runtime it needs through its
# own RPATH. Used by qfx's build and by qfxConfig.cmake after find_package(Torch).
function(qfx_make_torch_cpu_target name)
  if(TARGET ${name})
    return()
  endif()
  add_library(${name} INTERFACE IMPORTED GLOBAL)
  foreach(p INTERFACE_INCLUDE_DIRECTORIES INTERFACE_COMPILE_OPTIONS INTERFACE_COMPILE_FEATURES
            INTERFACE_COMPILE_DEFINITIONS)
    get_target_property(v torch ${p})
    if(v)
      set_property(TARGET ${name} PROPERTY ${p} "${v}")
    endif()
  endforeach()
  set_property(TARGET ${name} PROPERTY INTERFACE_LINK_LIBRARIES torch_cpu c10)
endfunction()

# qfx_pin_caffe2_to_torch(): libtorch's TorchConfig finds its Caffe2 part with a
# plain find_package, which searches the system's folders before its own: with
# Debian's libtorch-dev installed beside a torch wheel, the wheel's Torch would load
# Debian's Caffe2 targets (libtorch_cpu 1.13) and the link would fail. Pins Caffe2_DIR
# to the Caffe2 folder beside Torch_DIR. Call before find_package(Torch).
macro(qfx_pin_caffe2_to_torch)
  if(Torch_DIR AND EXISTS "${Torch_DIR}/../Caffe2/Caffe2Config.cmake")
    get_filename_component(_qfx_caffe2_dir "${Torch_DIR}/../Caffe2" ABSOLUTE)
    set(Caffe2_DIR "${_qfx_caffe2_dir}" CACHE PATH "libtorch's Caffe2 CMake config (beside Torch_DIR)" FORCE)
  endif()
endmacro()
