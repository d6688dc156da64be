# The runtime's tests (no libtorch): built by the full build and by the runtime-only
# build (QFX_RUNTIME_ONLY), which reads the ONNX fixtures a full build exported.
macro(qfx_needs_fixtures target)
  if(TARGET fixtures)
    add_dependencies(${target} fixtures)
  endif()
endmacro()

# Integer-only transformer ops: primitives (fast), and against the independent Python
# implementation of the paper's algorithms with ONNX Runtime's float group beside it.
add_executable(qfx_tests_integer_only backends/integer_only_test.cpp)
target_link_libraries(qfx_tests_integer_only PRIVATE qfx_runtime GTest::gtest GTest::gtest_main)
target_compile_definitions(qfx_tests_integer_only PRIVATE QFX_FIXTURE_DIR="${QFX_FIXTURE_DIR}")
qfx_needs_fixtures(qfx_tests_integer_only)
gtest_discover_tests(qfx_tests_integer_only TEST_FILTER "IntegerOnly.*" DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 300 LABELS fast)
gtest_discover_tests(qfx_tests_integer_only TEST_FILTER "*IntegerOnlyReference.*" DISCOVERY_TIMEOUT 120
                     PROPERTIES TIMEOUT 300 LABELS export)

# The runtime alone (no libtorch): ONNX models, int8 groups, errors, threads, taps.
add_executable(qfx_tests_runtime backends/runtime_test.cpp backends/int8_kernels_test.cpp backends/registry_test.cpp
  backends/arithmetic_test.cpp backends/target_arithmetic_test.cpp backends/int16_kernels_test.cpp
  backends/simd_kernels_test.cpp backends/device_placement_test.cpp backends/taps_test.cpp backends/op_table_test.cpp
  backends/onnx_ops_test.cpp backends/onnx_shape_ops_test.cpp backends/onnx_ops_model_test.cpp backends/opset21_test.cpp)
target_link_libraries(qfx_tests_runtime PRIVATE qfx_runtime GTest::gtest GTest::gtest_main Threads::Threads OpenMP::OpenMP_CXX
                      onnx_proto)
target_compile_definitions(qfx_tests_runtime PRIVATE QFX_FIXTURE_DIR="${QFX_FIXTURE_DIR}"
                           QFX_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
                           QFX_EXAMPLE_PLUGIN="$<TARGET_FILE:qfx_example_npu>")
add_dependencies(qfx_tests_runtime qfx_example_npu)
qfx_needs_fixtures(qfx_tests_runtime)
# ONNX opset 18..21 models and ONNX Runtime's outputs for opset21_test.cpp
# (backends/opset21_cases.py), written into the fixtures by a full build; the
# runtime-only build reads them from its QFX_FIXTURE_DIR.
# They need onnx >= 1.16 (INT4), ml_dtypes and onnxruntime: requirements.txt's, in the
# .venv that tools/install_deps.sh makes, also where QFX_PYTHON is an older system
# Python (the Debian libtorch 1.13 build).
if(NOT QFX_RUNTIME_ONLY)
  if(EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
    set(_qfx_onnx_py "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  else()
    set(_qfx_onnx_py "${QFX_PYTHON}")
  endif()
  add_custom_command(OUTPUT ${QFX_FIXTURE_DIR}/opset21/cases.txt
                     COMMAND ${_qfx_onnx_py} ${CMAKE_CURRENT_SOURCE_DIR}/backends/opset21_cases.py ${QFX_FIXTURE_DIR}/opset21
                     DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/backends/opset21_cases.py VERBATIM)
  add_custom_target(opset21_cases DEPENDS ${QFX_FIXTURE_DIR}/opset21/cases.txt)
  add_dependencies(qfx_tests_runtime opset21_cases)
endif()
gtest_discover_tests(qfx_tests_runtime DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 900 LABELS fast)
# The kernel-level equality tests again on each instruction set the build dispatches
# to: the vectorised kernels' variants (QFX_SIMD_ISA) and oneDNN's (DNNL_MAX_CPU_ISA).
# A variant this CPU lacks runs the best it has (the test prints which).
foreach(isa baseline:SSE41 avx2:AVX2 avx512:AVX512_CORE)
  string(REPLACE ":" ";" pair ${isa})
  list(GET pair 0 simd)
  list(GET pair 1 dnnl)
  add_test(NAME kernels_isa_${simd} COMMAND ${CMAKE_COMMAND} -E env QFX_SIMD_ISA=${simd} DNNL_MAX_CPU_ISA=${dnnl}
           $<TARGET_FILE:qfx_tests_runtime> --gtest_filter=SimdKernels.*:Int8Kernels.*:Opset21.ModelsMatchOnnxRuntime)
  set_tests_properties(kernels_isa_${simd} PROPERTIES TIMEOUT 600 LABELS fast)
endforeach()

# The CUDA backend (label cuda): op by op and on whole int8 models against the
# reference backend. Without a CUDA device each test reports skipped with the reason
# (NoDevice.* then checks that nodes decline to the CPU); tools/gpu/prove.sh runs
# them on a GPU machine.
add_executable(qfx_tests_cuda cuda/cuda_kernels_test.cpp cuda/cuda_model_test.cpp)
target_link_libraries(qfx_tests_cuda PRIVATE qfx_runtime GTest::gtest GTest::gtest_main)
target_compile_definitions(qfx_tests_cuda PRIVATE QFX_FIXTURE_DIR="${QFX_FIXTURE_DIR}")
gtest_discover_tests(qfx_tests_cuda DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 600 LABELS "cuda;fast")
