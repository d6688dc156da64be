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
