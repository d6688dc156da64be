// save_graph_module / load_graph_module: traced, prepared (calibrated), QAT-trained
// and converted GraphModules round-trip bit for bit, in this process and in a
// fresh one; bad files are IoErrors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "../common/scratch_dir.h"
#include "fx/fixtures.h"
#include "qfx/error.h"
#include "qfx/fx/serialize.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/quantized_modules.h"

using namespace qfx;
using namespace qfx::quant;

namespace {

std::string tmp_path(const std::string& name) {
  return (std::filesystem::path(qfx::test::scratch_path()) / name).string();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Same names, dtypes, shapes and values of every parameter and buffer.
void expect_same_state(fx::GraphModule& a, fx::GraphModule& b) {
  auto pa = a.named_parameters(true), pb = b.named_parameters(true);
  ASSERT_EQ(pa.size(), pb.size());
  EXPECT_EQ(pa.keys(), pb.keys()) << "parameter order (optimizers rely on it)";
  for (const auto& p : pa) {
    const at::Tensor* q = pb.find(p.key());
    ASSERT_NE(q, nullptr) << p.key();
    EXPECT_TRUE(at::equal(p.value(), *q)) << p.key();
    EXPECT_EQ(p.value().requires_grad(), q->requires_grad()) << p.key();
  }
  auto ba = a.named_buffers(true), bb = b.named_buffers(true);
  ASSERT_EQ(ba.size(), bb.size());
  for (const auto& x : ba) {
    const at::Tensor* y = bb.find(x.key());
    ASSERT_NE(y, nullptr) << x.key();
    EXPECT_EQ(x.value().scalar_type(), y->scalar_type()) << x.key();
    EXPECT_TRUE(at::equal(x.value(), *y)) << x.key();
  }
}

// Bit-identical values: tensors, or tuples/lists of them.
void expect_same_value(const c10::IValue& a, const c10::IValue& b, const std::string& what) {
  if (a.isTensor()) {
    ASSERT_TRUE(b.isTensor()) << what;
    EXPECT_TRUE(at::equal(a.toTensor(), b.toTensor())) << what;
  } else if (a.isTuple() || a.isList()) {
    const auto ea = a.isTuple() ? a.toTupleRef().elements().vec() : a.toListRef().vec();
    const auto eb = b.isTuple() ? b.toTupleRef().elements().vec() : b.isList() ? b.toListRef().vec() : std::vector<c10::IValue>{};
    ASSERT_EQ(ea.size(), eb.size()) << what;
    for (size_t i = 0; i < ea.size(); ++i) expect_same_value(ea[i], eb[i], what + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_EQ(a, b) << what;
  }
}

void expect_same_graph(const fx::GraphModule& a, const fx::GraphModule& b) {
  EXPECT_EQ(a.code(), b.code());
  const auto na = a.graph().nodes(), nb = b.graph().nodes();
  ASSERT_EQ(na.size(), nb.size());
  for (size_t i = 0; i < na.size(); ++i) {
    EXPECT_EQ(na[i]->name(), nb[i]->name());
    EXPECT_EQ(na[i]->target(), nb[i]->target());
    EXPECT_EQ(na[i]->op(), nb[i]->op());
  }
}

// resnet18 traced, prepared for onednn and calibrated on random batches.
std::shared_ptr<fx::GraphModule> calibrated_resnet18() {
  at::NoGradGuard ng;
  torch::manual_seed(0);
  auto gm = fx::trace_file(test::fixture("resnet18_scripted.pt"));
  gm->eval();
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  set_quant_state(*gm, QuantState::kCalibration);
  for (int i = 0; i < 3; ++i) gm->forward(at::randn({2, 3, 64, 64}));
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  return gm;
}

}  // namespace

// The acceptance test: a prepared, calibrated model saved, loaded in a
// fresh process, converted and exported gives the same ONNX and encodings as
// converting it without the round trip, and the loaded model's output is
// bit-identical.
TEST(GraphModuleSave, CalibratedModelConvertsIdenticallyInAFreshProcess) {
  auto gm = calibrated_resnet18();
  const std::string dir = tmp_path("gm_fresh");
  std::filesystem::create_directories(dir);
  const std::string saved = dir + "/resnet18_prepared.qfxgm";
  fx::save_graph_module(*gm, saved);
  const at::Tensor x = at::randn({2, 3, 64, 64});
  write_file(dir + "/input.pt", torch::jit::pickle_save(x));

  // Without the round trip.
  at::Tensor y;
  {
    at::NoGradGuard ng;
    y = gm->forward(x);
  }
  const std::string hash = graph_hash(*gm);
  auto converted = convert_fx(*gm);
  ExportOptions o;
  o.input_shapes = {{-1, 3, 64, 64}};
  auto r = export_onnx(*converted, dir + "/direct.onnx", o);
  write_encodings(dir + "/direct_encodings.json", r, hash, "onednn");

  // Through the file, in another process.
  const std::string cmd = std::string(QFX_GM_CHILD) + " '" + saved + "' '" + dir + "/input.pt' '" + dir + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string yb = read_file(dir + "/output.pt");
  const at::Tensor y2 = torch::jit::pickle_load(std::vector<char>(yb.begin(), yb.end())).toTensor();
  EXPECT_TRUE(at::equal(y, y2)) << "max diff " << (y - y2).abs().max().item<float>();
  const std::string onnx_direct = read_file(dir + "/direct.onnx");
  EXPECT_GT(onnx_direct.size(), 10000u);
  EXPECT_EQ(read_file(dir + "/model_int8.onnx"), onnx_direct) << "ONNX differs after the round trip";
  const std::string enc = read_file(dir + "/direct_encodings.json");
  EXPECT_NE(enc.find("\"activations\""), std::string::npos);
  EXPECT_EQ(read_file(dir + "/encodings.json"), enc) << "encodings differ after the round trip";
}

// In-process: graph, state and module classes come back; the loaded model keeps
// calibrating like the original (observer state, not just qparams, was saved).
TEST(GraphModuleSave, PreparedModelKeepsObserverState) {
  auto gm = calibrated_resnet18();
  set_quant_state(*gm, QuantState::kCalibration);  // observers on again
  const std::string path = tmp_path("prepared.qfxgm");
  fx::save_graph_module(*gm, path);
  auto back = fx::load_graph_module(path);
  expect_same_graph(*gm, *back);
  expect_same_state(*gm, *back);
  EXPECT_EQ(graph_hash(*gm), graph_hash(*back));
  int fused = 0;
  for (const auto& m : back->modules()) fused += dynamic_cast<FusedConvLinear*>(m.get()) != nullptr;
  EXPECT_EQ(fused, 21);  // resnet18: 20 convs and the fc
  at::NoGradGuard ng;
  const at::Tensor more = at::randn({2, 3, 64, 64}) * 3;  // grows the observed ranges
  gm->forward(more);
  back->forward(more);
  expect_same_state(*gm, *back);
  set_quant_state(*gm, QuantState::kFakeQuant);
  set_quant_state(*back, QuantState::kFakeQuant);
  const at::Tensor x = at::randn({2, 3, 64, 64});
  EXPECT_TRUE(at::equal(gm->forward(x), back->forward(x)));
}

// QAT: a model with a wrapped TorchScript method whose result depends on the
// training mode, trained a few steps with batch norm simulated; the loaded model
// trains on identically (same loss, same updates) and its wrapped method follows
// train()/eval() (softmax in training, argmax in eval).
TEST(GraphModuleSave, QatTrainedWrappedModelTrainsOnIdentically) {
  torch::manual_seed(1);
  auto gm = fx::trace_file(test::fixture("wrap_example.pt"));
  gm->train();
  prepare_qat_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  auto step = [](fx::GraphModule& m, const at::Tensor& x) {
    for (auto& p : m.parameters()) p.mutable_grad() = at::Tensor();
    at::Tensor loss = m.forward(x).pow(2).mean();
    loss.backward();
    at::NoGradGuard ng;
    for (auto& p : m.parameters())
      if (p.grad().defined()) p.sub_(0.01 * p.grad());
    return loss.item<double>();
  };
  for (int i = 0; i < 3; ++i) step(*gm, at::randn({4, 3, 8, 8}));
  freeze_bn_stats(*gm);
  const std::string path = tmp_path("qat.qfxgm");
  fx::save_graph_module(*gm, path);
  auto back = fx::load_graph_module(path);
  expect_same_graph(*gm, *back);
  expect_same_state(*gm, *back);
  EXPECT_TRUE(back->is_training());
  const at::Tensor x = at::randn({4, 3, 8, 8});
  EXPECT_EQ(step(*gm, x), step(*back, x));
  expect_same_state(*gm, *back);  // same gradients applied: still identical
  gm->eval();
  back->eval();
  at::NoGradGuard ng;
  EXPECT_TRUE(at::equal(gm->forward(x), back->forward(x)));
}

// Converted models (QuantDequant, QuantizedConvLinear with int8 codes) and
// traced float models with many leaf types (the zoo fixture) round-trip.
TEST(GraphModuleSave, ConvertedAndFloatZooRoundTrip) {
  auto gm = calibrated_resnet18();
  auto converted = convert_fx(*gm);
  const std::string p1 = tmp_path("converted.qfxgm");
  fx::save_graph_module(*converted, p1);
  auto back = fx::load_graph_module(p1);
  expect_same_state(*converted, *back);
  int qconv = 0;
  for (const auto& m : back->modules())
    if (auto* q = dynamic_cast<QuantizedConvLinear*>(m.get())) qconv += q->weight_quantized();
  EXPECT_EQ(qconv, 21);
  at::NoGradGuard ng;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  EXPECT_TRUE(at::equal(converted->forward(x), back->forward(x)));

  // Float models: many leaf types (zoo), a module kept whole by type whose
  // TorchScript code holds parameters (custom_module), a wrapped function.
  const std::vector<std::pair<const char*, const char*>> models = {
      {"zoo_scripted", ""}, {"zoo_traced", ""}, {"mobilenet_v2_scripted", ""},
      {"custom_module", "module_type:DecodeHead"}, {"function_call", "function:topk_decode"}};
  for (const auto& [fixture, wrap] : models) {
    fx::TracerOptions opts;
    if (*wrap) opts.wrap.push_back(fx::WrapSpec::parse(wrap));
    auto f = fx::trace_file(test::fixture(std::string(fixture) + ".pt"), opts);
    f->eval();
    const std::string p2 = tmp_path(std::string(fixture) + ".qfxgm");
    fx::save_graph_module(*f, p2);
    auto fb = fx::load_graph_module(p2);
    expect_same_graph(*f, *fb);
    expect_same_state(*f, *fb);
    auto inputs = test::load_tensor_list(test::fixture(std::string(fixture) + ".in.pt"));
    expect_same_value(f->forward(inputs), fb->forward(inputs), fixture);
  }
}

// A C++-traced model (native libtorch leaves) round-trips too.
TEST(GraphModuleSave, CxxTracedModelRoundTrips) {
  torch::manual_seed(2);
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).stride(2).padding(1)),
                            torch::nn::BatchNorm2d(4), torch::nn::ReLU(),
                            torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 4, 3).groups(2).bias(false)));
  net->eval();
  auto gm = fx::trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); },
                             {at::randn({1, 3, 16, 16})});
  const std::string path = tmp_path("cxx.qfxgm");
  fx::save_graph_module(*gm, path);
  auto back = fx::load_graph_module(path);
  expect_same_state(*gm, *back);
  at::NoGradGuard ng;
  const at::Tensor x = at::randn({2, 3, 16, 16});
  EXPECT_TRUE(at::equal(gm->forward(x), back->forward(x)));
}

// The file is what the README says: a torch.save zip that Python's torch.load
// opens, with the documented entries.
TEST(GraphModuleSave, FileOpensInPythonTorchLoad) {
  auto gm = fx::trace_file(test::fixture("wrap_example.pt"));
  const std::string path = tmp_path("py.qfxgm");
  fx::save_graph_module(*gm, path);
  const std::string cmd =
      std::string("\"") + QFX_PYTHON + "\" -c \"import sys, torch, torch.jit._pickle; "
      "P = torch.jit._pickle; ok = [getattr(P, f) for f in dir(P) if f.startswith(('build_', 'restore_'))]; "
      "getattr(torch.serialization, 'add_safe_globals', lambda g: None)(ok); "
      "d = torch.load(sys.argv[1]); "
      "assert d['format'] == 'qfx.GraphModule' and d['version'] == 1, d['format']; "
      "assert isinstance(d['graph'], list) and d['graph'][0]['op'] == 'placeholder'; "
      "assert 'def forward' in d['code'] and len(d['parameters']) > 0; "
      "assert isinstance(d['script'], torch.Tensor) and d['script'].dtype == torch.uint8\" '" + path + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Bad files and unsaveable modules: IoErrors naming the path, nothing written.
TEST(GraphModuleSave, BadFilesAreIoErrors) {
  auto gm = fx::trace_file(test::fixture("resnet18_scripted.pt"));
  const std::string good = tmp_path("good.qfxgm");
  fx::save_graph_module(*gm, good);
  const std::string bytes = read_file(good);

  auto expect_io = [](const std::string& path, const std::string& needle) {
    try {
      fx::load_graph_module(path);
      ADD_FAILURE() << "expected IoError for " << path;
    } catch (const IoError& e) {
      EXPECT_EQ(e.exit_code(), 7);
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_io(tmp_path("missing.qfxgm"), "missing or unreadable");
  const std::string trunc = tmp_path("truncated.qfxgm");
  std::ofstream(trunc, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_io(trunc, "truncated or corrupt");
  const std::string onnx = tmp_path("not_gm.qfxgm");
  std::ofstream(onnx, std::ios::binary) << "not a zip";
  expect_io(onnx, "not a saved GraphModule");

  // A file from a newer format version is refused.
  c10::IValue d = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  d.toGenericDict().insert_or_assign("version", fx::kGraphModuleFormatVersion + 1);
  const std::string newer = tmp_path("newer.qfxgm");
  write_file(newer, torch::jit::pickle_save(d));
  expect_io(newer, "newer qfx (GraphModule format version 2");

  // A tensor the rebuilt modules do not have room for is named.
  c10::IValue d2 = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  auto params = d2.toGenericDict().at("parameters").toGenericDict();
  params.erase("conv1.weight");
  const std::string lacking = tmp_path("lacking.qfxgm");
  write_file(lacking, torch::jit::pickle_save(d2));
  expect_io(lacking, "tensor 'conv1.weight'");

  // A module class without a serializer: IoError at save, no file left behind.
  struct Opaque : torch::nn::Module {
    Opaque() : torch::nn::Module("Opaque") {}
  };
  auto g2 = fx::trace_file(test::fixture("resnet18_scripted.pt"));
  g2->replace_submodule("conv1", std::make_shared<Opaque>(), [](std::vector<c10::IValue>& a) { return a.at(0); });
  const std::string out = tmp_path("opaque.qfxgm");
  try {
    fx::save_graph_module(*g2, out);
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("module 'conv1'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no serializer"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}
