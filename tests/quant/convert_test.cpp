// convert_fx: the exported int8 QDQ ONNX model, run on qfx's runtime, agrees with
// the fake-quantized GraphModule it came from.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"
#include "../common/next_batch.h"
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>

#include "fx/fixtures.h"
#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/quantized_modules.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/passes.h"
#include "qfx/runtime/model.h"

using namespace qfx;
using namespace qfx::quant;
using qfx::test::batches_of;

namespace {

struct SmallNetImpl : torch::nn::Module {
  SmallNetImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    b1 = register_module("b1", torch::nn::BatchNorm2d(8));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 3).padding(1)));
    fc = register_module("fc", torch::nn::Linear(16 * 4 * 4, 10));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::relu(b1->forward(c1->forward(x)));
    at::Tensor z = torch::relu(c2->forward(y) + y);
    at::Tensor c = torch::cat({torch::max_pool2d(z, 2), torch::avg_pool2d(z, 2)}, 1);
    return fc->forward(c.flatten(1));
  }
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::BatchNorm2d b1{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(SmallNet);

runtime::Tensor to_runtime(const at::Tensor& t) {
  at::Tensor c = t.contiguous().to(at::kFloat);
  runtime::Tensor r(std::vector<int64_t>(c.sizes().begin(), c.sizes().end()), runtime::DType::kFloat32);
  std::memcpy(r.raw(), c.data_ptr(), r.nbytes());
  return r;
}

at::Tensor to_aten(const runtime::Tensor& t) {
  return at::from_blob(const_cast<void*>(t.raw()), t.shape(), at::kFloat).clone();
}


// resnet18 (fixture) traced and prepared for the onednn backend; `x` is a [2, 3, 64, 64]
// input and `ref` the float model's output on it.
std::shared_ptr<fx::GraphModule> prepared_resnet18(at::Tensor* x, at::Tensor* ref) {
  at::NoGradGuard ng;
  auto gm = fx::trace_file(test::fixture("resnet18_scripted.pt"));
  gm->eval();
  *x = at::randn({2, 3, 64, 64});
  *ref = gm->forward(*x);
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  return gm;
}

std::string tmp_path(const std::string& name) { return (std::filesystem::path(qfx::test::scratch_path()) / name).string(); }

}  // namespace

TEST(ConvertFx, SmallNetInt8OnnxMatchesFakeQuant) {
  torch::manual_seed(0);
  SmallNet net;
  net->eval();
  auto gm = fx::trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 3, 8, 8})});
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  at::NoGradGuard ng;
  for (int i = 0; i < 8; ++i) gm->forward(at::randn({4, 3, 8, 8}));
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  const std::string path = tmp_path("qfx_convert_small.onnx");
  ExportOptions o;
  o.input_shapes = {{-1, 3, 8, 8}};
  const at::Tensor probe = at::randn({4, 3, 8, 8});
  const at::Tensor before = gm->forward(probe);
  auto converted = convert_fx(*gm);
  // The prepared model is left as it was (training could go on).
  EXPECT_TRUE(at::equal(gm->forward(probe), before));
  EXPECT_NE(gm->get_submodule("c1").get(), converted->get_submodule("c1").get());
  int qdq = 0, qconv = 0;
  for (const auto& m : converted->modules()) {
    qdq += dynamic_cast<QuantDequant*>(m.get()) != nullptr;
    if (auto* q = dynamic_cast<QuantizedConvLinear*>(m.get())) {
      ++qconv;
      EXPECT_TRUE(q->weight_quantized());
      EXPECT_EQ(q->weight_codes().scalar_type(), at::kChar);
      EXPECT_TRUE(q->bias_codes().defined()) << "the input scale is known: the bias is int32";
    }
    EXPECT_EQ(dynamic_cast<FakeQuantize*>(m.get()), nullptr) << "no FakeQuantize survives convert_fx";
  }
  EXPECT_EQ(qconv, 3);
  EXPECT_GE(qdq, 5);
  ExportResult r = export_onnx(*converted, path, o);
  EXPECT_EQ(r.quantized_weights, 3);
  EXPECT_TRUE(r.float_ops.empty()) << ::testing::PrintToString(r.float_ops);
  EXPECT_GE(r.encodings.size(), 5u);
  at::Tensor x = at::randn({16, 3, 8, 8});
  at::Tensor fq = gm->forward(x);
  // The converted model in libtorch computes what the int8 model computes, up to
  // float accumulation order (a near-tie may requantize one step apart).
  at::Tensor yc = converted->forward(x);
  for (const char* backend : {"reference", "onednn"}) {
    auto model = runtime::Model::load(path, {backend});
    EXPECT_TRUE(model.float_fallbacks().empty()) << ::testing::PrintToString(model.float_fallbacks());
    // conv x2, add (its relu fused: onednn's [add, relu]), avg pool, concat, gemm.
    EXPECT_EQ(model.int8_ops(), 6) << ::testing::PrintToString(model.kernel_impls());
    for (const auto& kv : model.kernel_impls()) EXPECT_EQ(kv.first.rfind("QRelu", 0), std::string::npos) << kv.first;
    at::Tensor y = to_aten(model.run({{"input", to_runtime(x)}}).at("output"));
    EXPECT_GT(test::cosine(y, yc), 0.99995) << backend;
    // Exact ties (the 2x2 average pool's x.5 means) are rounded from float values
    // one ulp off the tie in libtorch, so single codes differ upstream; nothing more.
    EXPECT_LT((y - yc).abs().max().item<float>(), 0.02f * yc.abs().max().item<float>()) << backend;
    EXPECT_GE(y.argmax(1).eq(yc.argmax(1)).sum().item<int64_t>(), 15) << backend;
    // The fake-quant model and the integer model differ by rounding only.
    EXPECT_GT(test::cosine(y, fq), 0.999) << backend;
    // Random weights leave near-ties between logits: allow one flip in 16.
    EXPECT_GE(y.argmax(1).eq(fq.argmax(1)).sum().item<int64_t>(), 15) << backend;
  }
  std::filesystem::remove(path);
}

TEST(ConvertFx, ResNet18Int8OnnxTracksFloat) {
  at::NoGradGuard ng;
  at::Tensor x, ref;
  auto gm = prepared_resnet18(&x, &ref);
  for (int i = 0; i < 4; ++i) gm->forward(at::randn({2, 3, 64, 64}));
  gm->forward(x);
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  at::Tensor fq = gm->forward(x);
  const std::string path = tmp_path("qfx_convert_resnet18.onnx");
  ExportOptions o;
  o.input_shapes = {{-1, 3, 64, 64}};
  ExportResult r = export_onnx(*convert_fx(*gm), path, o);
  EXPECT_EQ(r.quantized_weights, 21);
  auto model = runtime::Model::load(path, {"onednn"});
  EXPECT_TRUE(model.float_fallbacks().empty()) << ::testing::PrintToString(model.float_fallbacks());
  at::Tensor y = to_aten(model.run({{model.inputs()[0].name, to_runtime(x)}}).at("output"));
  EXPECT_GT(test::cosine(y, fq), 0.995);
  EXPECT_GT(test::cosine(y, ref), 0.98) << "int8 against the float model";
  std::filesystem::remove(path);
}

TEST(ConvertFx, WrappedCallsAreNamedAndNothingIsWritten) {
  auto gm = fx::trace_file(test::fixture("wrap_example.pt"));
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  const std::string path = tmp_path("qfx_convert_wrap.onnx");
  std::filesystem::remove(path);
  ExportOptions o;
  o.input_shapes = {{-1, 3, 8, 8}};
  try {
    export_onnx(*gm, path, o);  // a prepared model: converted first, then exported
    FAIL() << "expected UnsupportedOpError";
  } catch (const UnsupportedOpError& e) {
    EXPECT_NE(std::string(e.what()).find("_post_process"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

namespace {

// Every activation FakeQuantize of `gm` by qualified name.
std::map<std::string, FakeQuantize*> fake_quants(fx::GraphModule& gm) {
  std::map<std::string, FakeQuantize*> out;
  for (const auto& item : gm.named_modules("", false))
    if (auto* fq = dynamic_cast<FakeQuantize*>(item.value().get())) out[item.key()] = fq;
  return out;
}

}  // namespace

// Calibrating on the runtime (oneDNN and reference kernels) gives each observer
// the statistics a libtorch forward gives it: same observed ranges (up to float
// summation order in the kernels) and so the same qparams.
TEST(Calibrate, RuntimeMatchesLibtorchObservers) {
  torch::manual_seed(0);
  SmallNet net;
  net->eval();
  auto tracefn = [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); };
  at::Tensor data = at::randn({40, 3, 8, 8});
  for (const char* backend : {"onednn", "reference"}) {
    for (const char* observer : {"minmax", "histogram"}) {
      SCOPED_TRACE(std::string(backend) + " / " + observer);
      auto q = std::make_shared<QConfig>();
      q->activation.observer = parse_observer_kind(observer);
      if (std::string(observer) == "histogram") q->activation.algorithm = Algorithm::kMinMax;
      QConfigMapping mapping;
      mapping.set_global(q);
      auto ref = fx::trace_module(net.ptr(), tracefn, {at::randn({2, 3, 8, 8})});
      auto got = fx::trace_module(net.ptr(), tracefn, {at::randn({2, 3, 8, 8})});
      prepare_fx(*ref, mapping, BackendConfig::resolve("onednn"));
      prepare_fx(*got, mapping, BackendConfig::resolve("onednn"));
      {
        at::NoGradGuard ng;
        for (int64_t i = 0; i < data.size(0); i += 16) ref->forward(data.slice(0, i, std::min<int64_t>(i + 16, data.size(0))));
      }
      CalibrateOptions co;
      co.backend = backend;
      co.input_shapes = {{-1, 3, 8, 8}};
      int64_t seen = 0;
      co.progress = [&](int64_t n) { seen = n; };
      CalibrationResult r = calibrate(*got, batches_of(data, 16), co);
      EXPECT_EQ(r.engine, std::string("runtime:") + backend);
      EXPECT_EQ(r.images, 40);
      EXPECT_EQ(r.batches, 3);
      EXPECT_EQ(seen, 40);
      auto a = fake_quants(*ref), b = fake_quants(*got);
      ASSERT_EQ(a.size(), b.size());
      int compared = 0;
      for (auto& kv : a) {
        FakeQuantize* fb = b.at(kv.first);
        ASSERT_TRUE(fb->observer().has_data()) << kv.first << " saw nothing on the runtime";
        auto [lo_a, hi_a] = kv.second->observer().min_max();
        auto [lo_b, hi_b] = fb->observer().min_max();
        EXPECT_LT(test::rel_error(lo_b, lo_a), 1e-5) << kv.first;
        EXPECT_LT(test::rel_error(hi_b, hi_a), 1e-5) << kv.first;
        QParams qa = kv.second->qparams(), qb = fb->qparams();
        EXPECT_LT(test::rel_error(qb.scale, qa.scale), 1e-5) << kv.first;
        EXPECT_TRUE(at::equal(qa.zero_point, qb.zero_point)) << kv.first;
        ++compared;
      }
      EXPECT_GE(compared, 8);  // input, c1, c2, add, pools, cat, fc weights and output
    }
  }
}

// What the calibration batch size changes (README, "What calibration results depend
// on"): nothing for min/max observers, which see every value once; for histogram
// observers, the exact min/max stay equal but the bin grid (set by the first batch,
// then grown by integer factors) may differ. The reference backend computes each
// sample the same way at any batch size.
TEST(Calibrate, BatchSizeChangesOnlyHistogramGrids) {
  torch::manual_seed(0);
  SmallNet net;
  net->eval();
  auto tracefn = [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); };
  at::Tensor data = at::randn({48, 3, 8, 8});
  for (const char* observer : {"minmax", "histogram"}) {
    SCOPED_TRACE(observer);
    auto q = std::make_shared<QConfig>();
    q->activation.observer = parse_observer_kind(observer);
    QConfigMapping mapping;
    mapping.set_global(q);
    std::vector<std::shared_ptr<fx::GraphModule>> gms;
    for (int64_t bs : {4, 48}) {
      auto gm = fx::trace_module(net.ptr(), tracefn, {at::randn({2, 3, 8, 8})});
      prepare_fx(*gm, mapping, BackendConfig::resolve("onednn"));
      CalibrateOptions co;
      co.backend = "reference";
      co.input_shapes = {{-1, 3, 8, 8}};
      calibrate(*gm, batches_of(data, bs), co);
      gms.push_back(gm);
    }
    auto a = fake_quants(*gms[0]), b = fake_quants(*gms[1]);
    ASSERT_EQ(a.size(), b.size());
    for (auto& kv : a) {
      auto [lo_a, hi_a] = kv.second->observer().min_max();
      auto [lo_b, hi_b] = b.at(kv.first)->observer().min_max();
      EXPECT_TRUE(at::equal(lo_a, lo_b) && at::equal(hi_a, hi_b)) << kv.first << ": min/max differ between batch sizes";
      if (std::string(observer) == "minmax") {
        QParams qa = kv.second->qparams(), qb = b.at(kv.first)->qparams();
        EXPECT_TRUE(at::equal(qa.scale, qb.scale) && at::equal(qa.zero_point, qb.zero_point)) << kv.first;
      }
    }
  }
}

// resnet18 calibrated on the runtime converts to an int8 model that tracks float.
TEST(Calibrate, ResNet18OnRuntimeConvertsAndTracksFloat) {
  at::NoGradGuard ng;
  at::Tensor x, ref;
  auto gm = prepared_resnet18(&x, &ref);
  CalibrateOptions co;
  co.input_shapes = {{-1, 3, 64, 64}};
  CalibrationResult r = calibrate(*gm, batches_of(at::cat({at::randn({8, 3, 64, 64}), x}), 5), co);
  EXPECT_EQ(r.engine, "runtime:onednn");
  EXPECT_TRUE(r.fallback_reason.empty());
  EXPECT_GT(r.observed_tensors, 20);
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  const std::string path = tmp_path("qfx_calibrate_resnet18.onnx");
  ExportOptions o;
  o.input_shapes = {{-1, 3, 64, 64}};
  export_onnx(*convert_fx(*gm), path, o);
  auto model = runtime::Model::load(path, {"onednn"});
  at::Tensor y = to_aten(model.run({{model.inputs()[0].name, to_runtime(x)}}).at("output"));
  EXPECT_GT(test::cosine(y, gm->forward(x)), 0.995);
  EXPECT_GT(test::cosine(y, ref), 0.98);
  std::filesystem::remove(path);
}

// A wrapped call cannot run on the runtime: calibration falls back to libtorch and
// says why, or throws when the fallback is off.
TEST(Calibrate, WrappedCallsFallBackToLibtorch) {
  auto gm = fx::trace_file(test::fixture("wrap_example.pt"));
  gm->eval();
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  CalibrateOptions co;
  co.input_shapes = {{-1, 3, 8, 8}};
  CalibrationResult r = calibrate(*gm, batches_of(at::randn({6, 3, 8, 8}), 3), co);
  EXPECT_EQ(r.engine, "libtorch");
  EXPECT_NE(r.fallback_reason.find("_post_process"), std::string::npos) << r.fallback_reason;
  EXPECT_EQ(r.images, 6);
  int observed = 0;
  for (auto& kv : fake_quants(*gm)) observed += kv.second->observer().has_data();
  EXPECT_GT(observed, 0);
  co.allow_libtorch_fallback = false;
  EXPECT_THROW(calibrate(*gm, batches_of(at::randn({3, 3, 8, 8}), 3), co), UnsupportedOpError);
}

// A module whose qconfig asks for s16 activations (a target listing s16): its output
// is exported as int16 Q/DQ in ONNX Runtime's com.microsoft domain, the next conv
// runs as a 16x8 layer (int16 input, 64-bit accumulator), the reference and onednn
// backends agree bit for bit, and the int8 model tracks the converted libtorch model.
TEST(ConvertFx, Int16ActivationsRunAs16x8Layers) {
  torch::manual_seed(0);
  SmallNet net;
  net->eval();
  auto gm = fx::trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 3, 8, 8})});
  BackendConfig backend = BackendConfig::resolve("reference");
  backend.activation.dtypes.push_back(QDType::kInt16);
  auto wide = std::make_shared<QConfig>();
  wide->activation.dtype = QDType::kInt16;
  QConfigMapping mapping;
  mapping.set_module_name("c1", wide);
  prepare_fx(*gm, mapping, backend);
  at::NoGradGuard ng;
  for (int i = 0; i < 8; ++i) gm->forward(at::randn({4, 3, 8, 8}));
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  const std::string path = tmp_path("qfx_convert_int16.onnx");
  ExportOptions o;
  o.input_shapes = {{-1, 3, 8, 8}};
  auto converted = convert_fx(*gm);
  ExportResult r = export_onnx(*converted, path, o);
  int s16 = 0;
  for (const auto& e : r.encodings)
    if (e.dtype == "s16") {
      ++s16;
      EXPECT_EQ(e.quant_min, -32768);
      EXPECT_EQ(e.quant_max, 32767);
    }
  EXPECT_GE(s16, 1) << "c1's output (and the input c1 observes) are s16";
  const at::Tensor x = at::randn({16, 3, 8, 8});
  const at::Tensor yc = converted->forward(x);
  at::Tensor outs[2];
  for (int b = 0; b < 2; ++b) {
    auto model = runtime::Model::load(path, {b == 0 ? "reference" : "onednn"});
    int in16 = 0, out16 = 0;
    for (const auto& op : model.integer_ops()) {
      if (op.op != "QLinearConv") continue;
      in16 += op.input_dtype == "int16";
      out16 += op.output_dtype == "int16";
      if (op.input_dtype == "int16") EXPECT_EQ(op.accumulator_bits, 64);
    }
    EXPECT_EQ(out16, 1) << "c1 writes int16";
    // c2 reads c1's int16 output; c1 reads the graph input, which it observes with
    // its own qconfig (torch.ao's input activation of the first consumer): int16 too.
    EXPECT_EQ(in16, 2) << "c1 and c2 are 16x8 layers";
    outs[b] = to_aten(model.run({{"input", to_runtime(x)}}).at("output"));
    EXPECT_GT(test::cosine(outs[b], yc), 0.9999);
  }
  EXPECT_TRUE(at::equal(outs[0], outs[1])) << "reference and onednn (which leaves int16 to the reference) agree";
  std::filesystem::remove(path);
}
