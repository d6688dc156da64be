// The TFLite writer of a build without FlatBuffers or the TFLite schema
// (cmake/qfxTflite.cmake): it says so.
#include "qfx/error.h"
#include "qfx/runtime/tflite.h"

namespace qfx::runtime {

bool tflite_available() { return false; }

TfliteSummary write_tflite(const std::string& onnx_path, const std::string&, const TfliteOptions&) {
  throw UnsupportedOpError(onnx_path + ": this qfx was built without the TFLite writer (it needs libflatbuffers-dev and "
                           "ai-edge-litert when qfx is built; tools/install_deps.sh installs both)");
}

}  // namespace qfx::runtime
