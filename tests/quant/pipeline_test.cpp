// quant::ptq and quant::qat called as a library: the result structs checked
// against libtorch's own run of the float model, the files they write, and how
// many models a job loads.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/script.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/scratch_dir.h"
#include "qfx/error.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/pipeline.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/runtime/model.h"

namespace fs = std::filesystem;
using namespace qfx::quant;

namespace {

std::string source(const std::string& rel) { return std::string(QFX_SOURCE_DIR) + "/" + rel; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// Top-1 of the TorchScript model at `path` on the first `n` samples of a data
// section, computed by libtorch alone (the independent expectation).
double libtorch_top1(const std::string& path, const DataSpec& data, const std::vector<int64_t>& shape, int64_t n) {
  torch::jit::script::Module m = torch::jit::load(path);
  m.eval();
  auto ds = open_dataset(data, shape, n, -1);
  at::NoGradGuard ng;
  const at::Tensor x = ds->batch(0, ds->size());
  const at::Tensor y = m.forward({x}).toTensor();
  return y.argmax(1).eq(ds->labels()).to(at::kDouble).mean().item<double>();
}

}  // namespace

// The default job, smaller: the float model is exported once and loaded once
// (shared by calibration, evaluation and the per-layer SQNR); the int8 model is
// parsed once and planned three times: for evaluation, unfused for the fake-quant
// SQNR, and on the reference backend.
TEST(Pipeline, PtqLoadsTheFloatModelOnceAndReportsWhatLibtorchComputes) {
  qfx::test::ScratchDir tmp;
  const std::string out = (tmp.path() / "out").string();
  const JobConfig cfg = load_job_config(source("configs/ptq/default.yaml"),
                                        {"calibration.num_samples=128", "evaluation.num_samples=300", "evaluation.sqnr_samples=32",
                                         "evaluation.reference_check=100", "output.dir=" + out});
  const int64_t loads_before = qfx::runtime::Model::load_count();
  const int64_t parses_before = qfx::runtime::Model::parse_count();
  const PtqResult r = ptq(cfg);
  EXPECT_EQ(qfx::runtime::Model::load_count() - loads_before, 4);
  EXPECT_EQ(qfx::runtime::Model::parse_count() - parses_before, 2);

  ASSERT_TRUE(r.evaluated);
  const PtqEvaluation& E = r.evaluation;
  EXPECT_EQ(E.images, 300);
  EXPECT_EQ(r.calibration.images, 128);
  EXPECT_EQ(r.calibration.engine, "runtime:onednn");
  // fp32 on the runtime against libtorch's own forward of the TorchScript file.
  const double expected = libtorch_top1(cfg.model.path, cfg.evaluation.data, cfg.model.input_shape, 300);
  ASSERT_TRUE(E.has_top1);
  EXPECT_NEAR(E.top1_fp32, expected, 1.0 / 300 + 1e-12);
  EXPECT_LT(E.fp32_runtime_vs_libtorch_max_rel_error, 1e-4);
  EXPECT_GT(E.cosine_int8_vs_fp32, 0.99);
  EXPECT_NEAR(E.top1_int8, E.top1_fp32, 0.03);
  // Per-layer SQNR: every activation layer, worst first, int8 kernels included.
  ASSERT_FALSE(E.layers.empty());
  EXPECT_EQ(E.sqnr_images, 32);
  auto key = [](const LayerSqnr& l) { return l.has_int8 ? l.sqnr_db_int8 : l.sqnr_db_fakequant; };
  int int8_layers = 0;
  for (size_t i = 0; i < E.layers.size(); ++i) {
    EXPECT_TRUE(std::isfinite(key(E.layers[i]))) << E.layers[i].node;
    if (i > 0) EXPECT_LE(key(E.layers[i - 1]), key(E.layers[i]));
    int8_layers += E.layers[i].has_int8;
  }
  EXPECT_GE(int8_layers, 10);  // every conv and add of the CNN runs in int8
  EXPECT_GT(key(E.layers.front()), 15.0);
  // The reference backend: an all-int8 model must match bit for bit.
  EXPECT_EQ(E.reference_images, 100);
  EXPECT_TRUE(E.reference_exact_expected);
  EXPECT_EQ(E.reference_identical, 100);
  EXPECT_TRUE(r.runtime_float_groups.empty());

  // The files, and report.json saying what the struct says.
  ASSERT_EQ(r.outputs.size(), 5u);  // model_int8.onnx, encodings.json, report.json, model_fp32.onnx, report.html
  for (const auto& f : r.outputs) EXPECT_TRUE(fs::is_regular_file(f)) << f;
  const nlohmann::json rep = read_json(out + "/report.json");
  EXPECT_EQ(rep["evaluation"]["top1_int8"].get<double>(), E.top1_int8);
  EXPECT_EQ(rep["evaluation"]["cosine_int8_vs_fp32"].get<double>(), E.cosine_int8_vs_fp32);
  EXPECT_EQ(rep["per_layer_sqnr"]["layers"].size(), E.layers.size());
  EXPECT_EQ(rep["per_layer_sqnr"]["layers"][0]["node"].get<std::string>(), E.layers.front().node);
  EXPECT_EQ(rep["calibration"]["images"].get<int64_t>(), 128);
  EXPECT_EQ(rep["outputs"].get<std::vector<std::string>>(), r.outputs);
  // model_fp32.onnx is the lowered float model: on the reference kernels it runs
  // to libtorch's outputs of the TorchScript file.
  auto fp32 = qfx::runtime::Model::load(out + "/model_fp32.onnx", {"reference", false});
  auto ds = open_dataset(cfg.evaluation.data, cfg.model.input_shape, 16, -1);
  at::Tensor x = ds->batch(0, 16).contiguous();
  torch::jit::script::Module m = torch::jit::load(cfg.model.path);
  m.eval();
  at::NoGradGuard ng;
  const at::Tensor want = m.forward({x}).toTensor();
  const at::Tensor g = aten_view(fp32.run({{"input", runtime_view(x)}}).at("output")).clone();
  EXPECT_LT(((g - want).abs().max() / want.abs().max()).item<double>(), 1e-4);
}

// A short QAT run: the struct's training, evaluation and reference numbers, and
// report.json written from it.
TEST(Pipeline, QatShortRunFillsItsResult) {
  qfx::test::ScratchDir tmp;
  const std::string out = (tmp.path() / "out").string();
  const JobConfig cfg = load_job_config(source("configs/qat/fashion_mobilenet.yaml"),
                                        {"training.num_samples=640", "training.max_steps=8", "calibration.num_samples=128",
                                         "evaluation.num_samples=200", "evaluation.reference_check=64", "output.dir=" + out});
  const QatResult r = qat(cfg);
  EXPECT_EQ(r.steps, 8);
  ASSERT_FALSE(r.curve.empty());
  EXPECT_EQ(r.curve.back().step, 8);
  for (const auto& p : r.curve) EXPECT_TRUE(std::isfinite(p.loss));
  EXPECT_TRUE(fs::is_regular_file(r.checkpoint)) << r.checkpoint;
  EXPECT_EQ(r.eval_images, 200);
  EXPECT_NEAR(r.top1_fp32, libtorch_top1(cfg.model.path, cfg.evaluation.data, cfg.model.input_shape, 200), 1.0 / 200 + 1e-12);
  // The int8 model computes what fake quantization simulated, up to rounding at ties.
  EXPECT_GT(r.int8_agrees_with_fakequant, 0.95);
  EXPECT_EQ(r.reference_images, 64);
  if (r.reference_exact_expected) EXPECT_EQ(r.reference_identical, 64);
  const nlohmann::json rep = read_json(out + "/report.json");
  EXPECT_EQ(rep["training"]["steps"].get<int64_t>(), 8);
  EXPECT_EQ(rep["training"]["curve"].size(), r.curve.size());
  EXPECT_EQ(rep["evaluation"]["top1_int8"].get<double>(), r.top1_int8);
  EXPECT_EQ(rep["outputs"].get<std::vector<std::string>>(), r.outputs);
}

// A config error found before any work: no output folder appears.
TEST(Pipeline, PtqTop1WithoutLabelsFailsBeforeWriting) {
  qfx::test::ScratchDir tmp;
  const std::string out = (tmp.path() / "out").string();
  // A config file with this is refused at load; a JobConfig built in C++ is checked by ptq.
  JobConfig cfg = load_job_config(source("configs/ptq/default.yaml"), {"calibration.num_samples=64", "output.dir=" + out});
  cfg.evaluation.data.labels.clear();
  try {
    ptq(cfg);
    FAIL() << "expected a ConfigError";
  } catch (const qfx::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("evaluation.metric top1 needs labels"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
}
