# The TFLite writer (backends/src/tflite) needs FlatBuffers' C++ builder (Debian's
# libflatbuffers-dev) and the TFLite schema's numbers, read at build time from the
# builders flatc generated from the schema that LiteRT ships
# (ai_edge_litert.schema_py_generated, in .venv from requirements.txt). Without
# either, qfx builds without it: runtime::tflite_available() is false and asking for
# TFLite output is a clear error. Override the interpreter with -DQFX_TFLITE_PYTHON.
if(NOT QFX_TFLITE_PYTHON)
  if(EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
    set(QFX_TFLITE_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  elseif(QFX_PYTHON)
    set(QFX_TFLITE_PYTHON "${QFX_PYTHON}")
  else()
    find_program(QFX_TFLITE_PYTHON NAMES python3)
  endif()
endif()
find_path(QFX_FLATBUFFERS_INCLUDE flatbuffers/flatbuffers.h)
set(QFX_HAVE_TFLITE OFF)
if(QFX_FLATBUFFERS_INCLUDE AND QFX_TFLITE_PYTHON)
  execute_process(COMMAND "${QFX_TFLITE_PYTHON}" -c "import ai_edge_litert.schema_py_generated as m; print(m.__file__)"
                  OUTPUT_VARIABLE QFX_TFLITE_SCHEMA_PY OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _qfx_tfl_rc ERROR_QUIET)
  if(_qfx_tfl_rc EQUAL 0)
    set(QFX_HAVE_TFLITE ON)
  endif()
endif()
if(QFX_HAVE_TFLITE)
  message(STATUS "qfx: TFLite writer on (schema from ${QFX_TFLITE_SCHEMA_PY})")
else()
  message(STATUS "qfx: TFLite writer off (needs libflatbuffers-dev and ai-edge-litert for ${QFX_TFLITE_PYTHON}; tools/install_deps.sh installs both)")
endif()

# qfx_add_tflite(target): the writer's sources (or its stub) on `target`.
function(qfx_add_tflite target)
  if(NOT QFX_HAVE_TFLITE)
    target_sources(${target} PRIVATE src/tflite/none.cpp)
    return()
  endif()
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/tflite_schema)
  set(_hdr ${_dir}/qfx_tflite_schema.h)
  add_custom_command(OUTPUT ${_hdr}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_dir}
    COMMAND "${QFX_TFLITE_PYTHON}" ${PROJECT_SOURCE_DIR}/tools/tflite/schema_header.py ${_hdr}
    DEPENDS ${PROJECT_SOURCE_DIR}/tools/tflite/schema_header.py ${QFX_TFLITE_SCHEMA_PY}
    COMMENT "Reading the TFLite schema's numbers from ai_edge_litert")
  target_sources(${target} PRIVATE ${_hdr} src/tflite/flatbuffer.cpp src/tflite/writer.cpp src/tflite/ops.cpp)
  target_include_directories(${target} PRIVATE ${_dir} ${QFX_FLATBUFFERS_INCLUDE})
endfunction()
