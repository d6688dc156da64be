// Float ONNX models read by load_onnx_model: outputs against ONNX Runtime's on the
// same file (models from both of torch's ONNX exporters, written by
// export_float_onnx.py into the build's fixtures), a dynamic batch, the graph the
// quantization passes see, and bad files.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../fuzz/onnx_model_harness.h"
#include "graph_counts.h"
#include "qfx/error.h"
#include "qfx/fx/onnx_model.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/qconfig.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/runtime/npy.h"

using qfx::fx::GraphModule;

namespace {

std::string fixture(const std::string& name) { return std::string(QFX_FIXTURE_DIR) + "/" + name; }

at::Tensor npy(const std::string& path) { return qfx::quant::aten_view(qfx::runtime::load_npy(path)).clone(); }

double rel_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor fa = a.to(at::kDouble), fb = b.to(at::kDouble);
  return ((fa - fb).abs().max() / fb.abs().max().clamp_min(1e-12)).item<double>();
}

at::Tensor first_output(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor();
  return v.toTupleRef().elements().at(0).toTensor();
}

// The model's output on its saved input against ONNX Runtime's (fp32, 1e-4 relative).
std::shared_ptr<GraphModule> expect_ort_outputs(const std::string& name) {
  at::NoGradGuard ng;
  auto gm = qfx::fx::load_onnx_model(fixture(name + ".onnx"));
  const at::Tensor x = npy(fixture(name + ".onnx_in0.npy")), want = npy(fixture(name + ".ort0.npy"));
  const at::Tensor got = first_output(gm->forward(std::vector<c10::IValue>{x}));
  EXPECT_EQ(got.sizes(), want.sizes()) << name;
  if (got.sizes() == want.sizes()) EXPECT_LT(rel_error(got, want), 1e-4) << name;
  return gm;
}

using qfx::test::count_modules;

template <typename E>
void expect_error(const std::string& file, const std::string& needle) {
  try {
    qfx::fx::load_onnx_model(fixture(file));
    ADD_FAILURE() << file << " loaded";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << file << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << "the message names the file: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << file << ": another error class: " << e.what();
  }
}

}  // namespace

TEST(OnnxModel, CnnsFromTheTorchExportExporterRunToOnnxRuntimesOutputs) {
  for (const char* name : {"resnet18", "mobilenet_v3_small", "kws_1d", "lraspp_mobilenet_v3_large"}) expect_ort_outputs(name);
}

TEST(OnnxModel, ModelsFromTheTorchScriptExporterRunToOnnxRuntimesOutputs) {
  for (const char* name : {"mobilenet_v2_legacy", "mobilenet_v3_small_legacy", "small_cnn", "vit_tiny_opset14", "elementwise_net"})
    expect_ort_outputs(name);
}

// A BatchNormalization node read as a BatchNorm2d module keeps the file's running
// statistics: the reader's shadow runs call it in eval mode.
TEST(OnnxModel, BatchNormalizationNodesKeepTheirStatistics) {
  auto gm = expect_ort_outputs("small_cnn_bn_node");
  EXPECT_EQ(count_modules(*gm, "BatchNorm2d"), 1);
}

TEST(OnnxModel, VisionTransformersRunToOnnxRuntimesOutputs) {
  auto gm = expect_ort_outputs("vit_tiny");
  EXPECT_EQ(count_modules(*gm, "LayerNorm"), 5);
  EXPECT_GE(count_modules(*gm, "Linear"), 9);  // MatMul + bias Add read as Linear
  auto legacy = expect_ort_outputs("vit_tiny_legacy");
  int gelu = 0;
  for (const auto* n : legacy->graph().nodes()) gelu += n->op() == qfx::fx::Opcode::kCallFunction && n->target() == "aten::gelu";
  EXPECT_EQ(gelu, 2) << "GELU written as Erf arithmetic is read back as one gelu";
}

TEST(OnnxModel, WeightedLayersAreModulesAtTheirPyTorchPaths) {
  auto gm = qfx::fx::load_onnx_model(fixture("resnet18.onnx"));
  EXPECT_EQ(count_modules(*gm, "Conv2d"), 20);
  EXPECT_EQ(count_modules(*gm, "Linear"), 1);
  EXPECT_TRUE(gm->get_submodule("layer1.0.conv1")) << "the path the weight's name carries";
  EXPECT_TRUE(gm->get_submodule("fc"));
  EXPECT_TRUE(gm->parameters().size() >= 42);
  for (const auto& p : gm->parameters()) EXPECT_TRUE(p.requires_grad()) << "parameters stay trainable (QAT)";
}

TEST(OnnxModel, DynamicBatchStaysDynamic) {
  at::NoGradGuard ng;
  for (const char* name : {"resnet18", "vit_tiny", "vit_tiny_legacy", "mobilenet_v2_legacy", "kws_1d"}) {
    auto gm = qfx::fx::load_onnx_model(fixture(std::string(name) + ".onnx"));
    const at::Tensor x = npy(fixture(std::string(name) + ".onnx_in0.npy")), want = npy(fixture(std::string(name) + ".ort0.npy"));
    const at::Tensor x5 = at::cat({x, x, x.slice(0, 0, 1)});
    const at::Tensor got = first_output(gm->forward(std::vector<c10::IValue>{x5}));
    ASSERT_EQ(got.size(0), 5) << name;
    EXPECT_LT(rel_error(got.slice(0, 0, 2), want), 1e-4) << name;
    EXPECT_LT(rel_error(got.slice(0, 4, 5), want.slice(0, 0, 1)), 1e-4) << name;
  }
}

TEST(OnnxModel, ExternalDataIsReadFromTheModelsFolder) {
  at::NoGradGuard ng;
  auto gm = qfx::fx::load_onnx_model(fixture("external_data/small_cnn.onnx"));
  const at::Tensor got = first_output(gm->forward(std::vector<c10::IValue>{npy(fixture("small_cnn.onnx_in0.npy"))}));
  EXPECT_LT(rel_error(got, npy(fixture("small_cnn.ort0.npy"))), 1e-4);
}

// The conv + relu6 fusions prepare_fx makes, counted from its report.
int relu6_fusions(GraphModule& gm) {
  auto report = qfx::quant::prepare_fx(gm, qfx::quant::QConfigMapping::default_mapping(), qfx::quant::BackendConfig::resolve("onednn"));
  int n = 0;
  for (const auto& c : report.changes) n += c.find("relu6 -> Conv") != std::string::npos;
  return n;
}

TEST(OnnxModel, PrepareFusesAsForTheTracedModel) {
  auto onnx = qfx::fx::load_onnx_model(fixture("mobilenet_v2_legacy.onnx"));
  EXPECT_TRUE(onnx->get_submodule("features.2.conv.0.0")) << "the path the legacy exporter's scope names carry";
  auto traced = qfx::fx::trace_file(fixture("mobilenet_v2_traced.pt"));
  const int from_onnx = relu6_fusions(*onnx), from_traced = relu6_fusions(*traced);
  EXPECT_EQ(from_onnx, 35) << "every Conv + Clip(0, 6) fused as conv + relu6";
  EXPECT_EQ(from_onnx, from_traced);
}

// Inputs fuzz_onnx_model found (tests/fuzz/regressions/onnx_model): each loads and
// runs, or fails with a qfx::Error.
TEST(OnnxModelRegressions, FuzzFindingsFailCleanly) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(QFX_SOURCE_DIR) + "/tests/fuzz/regressions/onnx_model")) {
    ++files;
    try {
      qfx::fuzz::load_and_run_onnx_model(e.path().string());
    } catch (const qfx::Error&) {
    }
  }
  EXPECT_GE(files, 1);
}

// Inputs fuzz_onnx_external found (tests/fuzz/regressions/onnx_external: the model
// and its weights.bin in one file, as the fuzz target takes them), likewise. The
// first: a Conv whose input is an initializer, with asymmetric pads (the padded
// constant was folded and the conv read a null node).
TEST(OnnxModelRegressions, ExternalDataFuzzFindingsFailCleanly) {
  int files = 0;
  const std::string dir = (std::filesystem::temp_directory_path() / ("qfx_ext_" + std::to_string(::getpid()))).string();
  for (const auto& e : std::filesystem::directory_iterator(std::string(QFX_SOURCE_DIR) + "/tests/fuzz/regressions/onnx_external")) {
    ++files;
    std::ifstream f(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      qfx::fuzz::load_and_run_onnx_model(
          qfx::fuzz::write_external_input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), dir));
    } catch (const qfx::Error&) {
    }
  }
  std::filesystem::remove_all(dir);
  EXPECT_GE(files, 1);
}

TEST(OnnxModel, BadFilesAreRefusedWithTheirReason) {
  expect_error<qfx::IoError>("bad_truncated.onnx", "not an ONNX model");
  expect_error<qfx::UnsupportedOpError>("bad_domain.onnx", "com.example");
  expect_error<qfx::UnsupportedOpError>("bad_op.onnx", "NonMaxSuppression");
  expect_error<qfx::IoError>("bad_external.onnx", "inside the model's folder");
  expect_error<qfx::DataError>("bad_dynamic_dim.onnx", "height");
  expect_error<qfx::IoError>("no_such_model.onnx", "cannot open");
  expect_error<qfx::IoError>("bad_axis.onnx", "(Split): not a valid ONNX node: axis 7 for a rank-2 input");
  expect_error<qfx::IoError>("bad_huge.onnx", "(ConstantOfShape): not a valid ONNX node: the output has more than 2^30 elements");
  EXPECT_TRUE(qfx::fx::is_onnx_model("a/b/model.ONNX"));
  EXPECT_FALSE(qfx::fx::is_onnx_model("model.pt2"));
}
