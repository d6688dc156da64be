// Helper process of GraphModuleSave tests: loads a saved GraphModule in a fresh
// process, runs it on a saved input, then converts and exports it.
//
// Usage: gm_roundtrip_child SAVED_GM INPUT_PT OUT_DIR
// Writes OUT_DIR/output.pt (forward of the loaded model, torch.save format),
// OUT_DIR/model_int8.onnx and OUT_DIR/encodings.json. Exit 0 on success; a
// qfx::Error's exit code otherwise.
#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <iostream>
#include <iterator>

#include "qfx/error.h"
#include "qfx/fx/serialize.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/passes.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: gm_roundtrip_child SAVED_GM INPUT_PT OUT_DIR\n";
    return 2;
  }
  try {
    const std::string out = argv[3];
    auto gm = qfx::fx::load_graph_module(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    const at::Tensor x = torch::jit::pickle_load(bytes).toTensor();
    at::Tensor y;
    {
      at::NoGradGuard ng;
      y = gm->forward(x);
    }
    const auto yb = torch::jit::pickle_save(y);
    std::ofstream(out + "/output.pt", std::ios::binary).write(yb.data(), static_cast<std::streamsize>(yb.size()));
    const std::string hash = qfx::quant::graph_hash(*gm);
    auto converted = qfx::quant::convert_fx(*gm);
    qfx::quant::ExportOptions o;
    o.input_shapes = {{-1, 3, 64, 64}};
    auto r = qfx::quant::export_onnx(*converted, out + "/model_int8.onnx", o);
    qfx::quant::write_encodings(out + "/encodings.json", r, hash, "onednn");
    return 0;
  } catch (const qfx::Error& e) {
    std::cerr << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
