// torch.export programs read by load_exported_program: outputs against what PyTorch
// computed at export time, the graph the quantization passes see, and bad archives.
// ExportedProgramSample runs on every supported libtorch (a small archive committed
// under tests/data/pt2); the rest read the programs export_programs.py writes into
// the build's fixtures (torch 2.x).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "graph_counts.h"
#include "qfx/error.h"
#include "qfx/fx/exported_program.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/op_names.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/qconfig.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/runtime/npy.h"

namespace fs = std::filesystem;
using qfx::fx::GraphModule;

namespace {

std::string sample(const std::string& name) { return std::string(QFX_SOURCE_DIR) + "/tests/data/pt2/" + name; }
std::string fixture(const std::string& name) { return std::string(QFX_FIXTURE_DIR) + "/" + name; }

at::Tensor npy(const std::string& path) {
  const qfx::runtime::Tensor t = qfx::runtime::load_npy(path);
  if (t.dtype() == qfx::runtime::DType::kInt64)  // indices (nms)
    return at::from_blob(const_cast<void*>(t.raw()), t.shape(), at::kLong).clone();
  return qfx::quant::aten_view(t).clone();
}

double rel_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor fa = a.to(at::kDouble), fb = b.to(at::kDouble);
  return ((fa - fb).abs().max() / fb.abs().max().clamp_min(1e-12)).item<double>();
}

// The program's output on its saved input against PyTorch's output (fp32 within 1e-5 relative).
void expect_outputs(GraphModule& gm, const std::string& dir, const std::string& name) {
  at::NoGradGuard ng;
  const at::Tensor x = npy(dir + name + ".in0.npy"), want = npy(dir + name + ".out0.npy");
  const at::Tensor got = gm.forward(x);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LT(rel_error(got, want), 1e-5) << name;
}

using qfx::test::count_modules;

}  // namespace

TEST(ExportedProgramSample, RunsToPyTorchsOutputsWithTheLayersRebuilt) {
  ASSERT_TRUE(qfx::fx::is_exported_program(sample("small_cnn.pt2")));
  auto gm = qfx::fx::load_exported_program(sample("small_cnn.pt2"));
  expect_outputs(*gm, sample(""), "small_cnn");
  EXPECT_EQ(count_modules(*gm, "Conv2d"), 2);
  EXPECT_EQ(count_modules(*gm, "BatchNorm2d"), 2);
  EXPECT_EQ(count_modules(*gm, "Linear"), 1);
  EXPECT_EQ(count_modules(*gm, "ReLU"), 2);  // one ReLU module, called twice
  // named_parameters() as in PyTorch.
  std::set<std::string> names;
  for (const auto& p : gm->named_parameters()) names.insert(p.key());
  for (const char* n : {"conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight", "bn2.bias", "fc.weight", "fc.bias"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(names.size(), 9u);
}

TEST(ExportedProgramSample, WithoutRebuildingEveryNodeIsAnAtenCall) {
  qfx::fx::ExportedProgramOptions o;
  o.rebuild_modules = false;
  auto gm = qfx::fx::load_exported_program(sample("small_cnn.pt2"), o);
  expect_outputs(*gm, sample(""), "small_cnn");
  int convs = 0;
  for (const auto* n : gm->graph().nodes()) {
    EXPECT_NE(n->op(), qfx::fx::Opcode::kCallModule) << n->name();
    convs += n->op() == qfx::fx::Opcode::kCallFunction && n->target() == "aten::conv2d";
  }
  EXPECT_EQ(convs, 2);
}

TEST(ExportedProgramSample, OtherFilesAreNotPrograms) {
  EXPECT_FALSE(qfx::fx::is_exported_program(sample("small_cnn.in0.npy")));
  EXPECT_FALSE(qfx::fx::is_exported_program(std::string(QFX_SOURCE_DIR) + "/tests/data/torch1.13/small_cnn.pt"));
  EXPECT_FALSE(qfx::fx::is_exported_program(sample("no_such_file.pt2")));
  EXPECT_THROW(qfx::fx::load_exported_program(sample("no_such_file.pt2")), qfx::IoError);
}

// The model path every pipeline takes: trace_file reads a .pt2 as its graph.
TEST(ExportedProgramSample, TraceFileReadsPrograms) {
  auto gm = qfx::fx::trace_file(sample("small_cnn.pt2"));
  expect_outputs(*gm, sample(""), "small_cnn");
}

TEST(ExportedProgram, TorchvisionModelsRunToPyTorchsOutputs) {
  for (const char* name : {"resnet18", "mobilenet_v3_small", "vit_tiny", "kws_1d", "dynamic_batch"}) {
    SCOPED_TRACE(name);
    auto gm = qfx::fx::load_exported_program(fixture(std::string(name) + ".pt2"));
    expect_outputs(*gm, fixture(""), name);
  }
}

// An operator from a library (torchvision::nms): loaded on demand, run by the Interpreter.
TEST(ExportedProgram, CustomOperatorsFromLibraries) {
  auto gm = qfx::fx::load_exported_program(fixture("custom_op.pt2"));
  bool found = false;
  for (const auto* n : gm->graph().nodes()) found |= n->target() == "torchvision::nms";
  EXPECT_TRUE(found);
  at::NoGradGuard ng;
  const c10::IValue y = gm->forward(std::vector<c10::IValue>{npy(fixture("custom_op.in0.npy")), npy(fixture("custom_op.in1.npy"))});
  const at::Tensor want = npy(fixture("custom_op.out0.npy"));
  ASSERT_TRUE(y.isTensor());
  EXPECT_TRUE(at::equal(y.toTensor(), want.to(y.toTensor().scalar_type()))) << y.toTensor() << want;
}

TEST(ExportedProgram, DynamicBatchRunsAtOtherBatchSizes) {
  auto gm = qfx::fx::load_exported_program(fixture("dynamic_batch.pt2"));
  auto placeholders = gm->graph().placeholders();
  ASSERT_EQ(placeholders.size(), 1u);
  EXPECT_EQ(placeholders[0]->meta().at("traced_shape").toIntVector(), (std::vector<int64_t>{-1, 3, 16, 16}));
  at::NoGradGuard ng;
  const at::Tensor x = npy(fixture("dynamic_batch.in0.npy")), want = npy(fixture("dynamic_batch.out0.npy"));
  for (int64_t b : {1, 2}) EXPECT_LT(rel_error(gm->forward(x.slice(0, 0, b)), want.slice(0, 0, b)), 1e-5);
  const at::Tensor twice = at::cat({x, x});
  EXPECT_LT(rel_error(gm->forward(twice), at::cat({want, want})), 1e-5);
}

// One set of patterns serves both frontends: the same model traced from
// TorchScript and read from its exported program prepares to the same fused layers
// and the same number of activation observers.
TEST(ExportedProgram, PreparesLikeTheTorchScriptFrontend) {
  const auto backend = qfx::quant::BackendConfig::resolve("onednn");
  for (const auto& [ts, pt2] : std::vector<std::pair<std::string, std::string>>{{"resnet18_scripted.pt", "resnet18.pt2"},
                                                                                 {"mobilenet_v3_small.pt", "mobilenet_v3_small.pt2"}}) {
    SCOPED_TRACE(pt2);
    auto a = qfx::fx::trace_file(fixture(ts));
    auto b = qfx::fx::load_exported_program(fixture(pt2));
    a->eval();
    qfx::quant::prepare_fx(*a, qfx::quant::QConfigMapping::default_mapping(), backend);
    qfx::quant::prepare_fx(*b, qfx::quant::QConfigMapping::default_mapping(), backend);
    auto census = [](GraphModule& gm) {
      std::map<std::string, int> c;
      for (const auto* n : gm.graph().nodes())
        if (n->op() == qfx::fx::Opcode::kCallModule || n->op() == qfx::fx::Opcode::kCallFunction)
          ++c[qfx::quant::canonical_op_name(*n, gm)];
      return c;
    };
    const auto ca = census(*a), cb = census(*b);
    for (const char* op : {"fake_quantize", "conv2d", "linear", "add", "hardswish", "hardsigmoid", "relu"}) {
      const int na = ca.count(op) ? ca.at(op) : 0, nb = cb.count(op) ? cb.at(op) : 0;
      EXPECT_EQ(na, nb) << op;
    }
  }
}

TEST(ExportedProgram, BadArchivesAreClearErrors) {
  auto expect = [](const std::string& file, auto error_type, const std::string& text) {
    try {
      qfx::fx::load_exported_program(fixture(file));
      ADD_FAILURE() << file << ": no error";
    } catch (const decltype(error_type)& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  };
  expect("truncated.pt2", qfx::IoError(""), "truncated.pt2");
  expect("newer_schema.pt2", qfx::IoError(""), "schema 99.");
  expect("newer_schema.pt2", qfx::IoError(""), "reads schema 8.x");
  expect("missing_op.pt2", qfx::UnsupportedOpError(""), "qfx_missing::relu");
  expect("training_mode.pt2", qfx::UnsupportedOpError(""), "eval mode");
  expect("short_weight.pt2", qfx::IoError(""), "the tensor needs");
  expect("dangling.pt2", qfx::IoError(""), "reads 'nowhere', which no node computes");
  expect("two_programs.pt2", qfx::IoError(""), "holds 2 programs");
}
