// Block-wise weights (granularity: per_block) and weight-only quantization: the
// per-block qparams and fake quantization against the formulas written out element
// by element, the exported ONNX (DequantizeLinear-21 with block_size, INT4 packing)
// read back byte by byte, and the configuration errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../common/weight_only.h"
#include "../common/scratch_dir.h"
#include "fx/fixtures.h"
#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/block_quant.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/quantized_modules.h"

using namespace qfx;
using namespace qfx::quant;
using qfx::test::weight_only;

namespace {

QuantSpec block_spec(QDType dtype, QScheme scheme, int bits, int64_t block) {
  QuantSpec s = QuantSpec::make(dtype, scheme, bits);
  s.per_channel = true;
  s.block_size = block;
  return s;
}

// The weight FakeQuantize prepare_fx builds for `spec`, having observed `w`.
std::shared_ptr<FakeQuantize> observed_fq(const QuantSpec& spec, const at::Tensor& w) {
  ObserverSpec os;
  os.kind = ObserverKind::kPerChannelMinMax;
  os.spec = spec;
  auto fq = std::make_shared<FakeQuantize>(make_observer(os), false);
  fq->forward(w);
  return fq;
}

// torch.ao's qparams of one block, in float32 as compute_qparams documents them.
void block_qparams(const float* v, int64_t n, const QuantSpec& s, float* scale, int64_t* zp) {
  float lo = 0.0f, hi = 0.0f;  // the range always includes 0
  for (int64_t i = 0; i < n; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  const float qrange = static_cast<float>(s.quant_max - s.quant_min);
  if (s.qscheme == QScheme::kSymmetric) {
    *scale = std::max(std::max(-lo, hi) / (qrange / 2), std::numeric_limits<float>::epsilon());
    *zp = s.dtype == QDType::kUInt8 ? (s.quant_min + s.quant_max) / 2 : 0;
  } else {
    *scale = std::max((hi - lo) / qrange, std::numeric_limits<float>::epsilon());
    *zp = std::clamp<int64_t>(s.quant_min - static_cast<int64_t>(std::nearbyint(lo / *scale)), s.quant_min, s.quant_max);
  }
}

}  // namespace

TEST(BlockWeights, QParamsAndFakeQuantFollowEachBlock) {
  torch::manual_seed(0);
  const int64_t c = 5, k = 70, block = 32;  // blocks of 32, 32 and a short 6
  at::Tensor w = at::randn({c, k});
  w.index_put_({2, at::indexing::Slice(32, 64)}, w.index({2, at::indexing::Slice(32, 64)}) * 40);  // one wide block
  for (auto [dtype, scheme] : {std::pair{QDType::kInt8, QScheme::kSymmetric}, std::pair{QDType::kUInt8, QScheme::kAffine}}) {
    const QuantSpec spec = block_spec(dtype, scheme, 4, block);
    auto fq = observed_fq(spec, w);
    const QParams q = fq->qparams();
    ASSERT_EQ(q.block_size, block);
    ASSERT_EQ(q.scale.numel(), c * 3);
    const at::Tensor y = fq->forward(w);
    ASSERT_EQ(y.sizes(), w.sizes());
    for (int64_t r = 0; r < c; ++r) {
      for (int64_t b = 0; b < 3; ++b) {
        const int64_t lo = b * block, n = std::min(block, k - lo);
        const at::Tensor blk = w[r].narrow(0, lo, n).contiguous();
        float scale;
        int64_t zp;
        block_qparams(blk.data_ptr<float>(), n, spec, &scale, &zp);
        EXPECT_FLOAT_EQ(q.scale[r * 3 + b].item<float>(), scale) << r << "," << b;
        EXPECT_EQ(q.zero_point[r * 3 + b].item<int>(), zp) << r << "," << b;
        for (int64_t j = 0; j < n; ++j) {
          const float x = blk[j].item<float>();
          // x times 1/scale, as at::fake_quantize_per_channel_affine rounds (an exact
          // tie, a symmetric block's extreme at 7.5 steps, may land a step from x / scale).
          const float code = std::clamp<float>(std::nearbyint(x * (1.0f / scale)) + zp, spec.quant_min, spec.quant_max);
          EXPECT_NEAR(y[r][lo + j].item<float>(), (code - zp) * scale, 1e-6f * scale) << r << "," << lo + j;
        }
      }
    }
  }
}

TEST(BlockWeights, LearnableScaleTrainsPerBlock) {
  torch::manual_seed(1);
  const at::Tensor w = at::randn({3, 40});
  ObserverSpec os;
  os.kind = ObserverKind::kMovingAveragePerChannelMinMax;
  os.spec = block_spec(QDType::kInt8, QScheme::kSymmetric, 4, 16);
  FakeQuantize fq(make_observer(os), /*learnable=*/true);
  const at::Tensor y = fq.forward(w);
  y.pow(2).sum().backward();
  const at::Tensor g = fq.named_parameters()["scale"].grad();
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.numel(), 3 * 3) << "one learnable scale per block";
  EXPECT_GT(g.abs().sum().item<float>(), 0.0f);
}

namespace {

struct TwoLinearImpl : torch::nn::Module {
  TwoLinearImpl() {
    a = register_module("a", torch::nn::Linear(70, 24));
    b = register_module("b", torch::nn::Linear(24, 6));
  }
  // x [N, T, 70]: `a` runs as a MatMul (rank 3), `b` on the flattened rows as a Gemm.
  at::Tensor forward(const at::Tensor& x) { return b->forward(torch::gelu(a->forward(x)).sum(1)); }
  torch::nn::Linear a{nullptr}, b{nullptr};
};
TORCH_MODULE(TwoLinear);

const onnx::TensorProto* initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

int64_t attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return -1;
}

}  // namespace

TEST(BlockWeights, ExportsDequantizeLinear21WithPackedInt4) {
  torch::manual_seed(2);
  TwoLinear net;
  net->eval();
  auto gm = fx::trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); },
                             {at::randn({2, 3, 70})});
  prepare_fx(*gm, weight_only(4, 32), BackendConfig::resolve("onednn"));
  at::NoGradGuard ng;
  gm->forward(at::randn({2, 3, 70}));
  auto converted = convert_fx(*gm);
  ExportOptions o;
  o.input_shapes = {{-1, 3, 70}};
  ExportResult r;
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(export_onnx_bytes(*converted, o, &r)));
  EXPECT_EQ(r.quantized_weights, 2);
  EXPECT_TRUE(r.encodings.empty()) << "weight-only: no activation is quantized";
  ASSERT_EQ(m.opset_import(0).version(), 21) << "block-wise weights need DequantizeLinear-21";
  int blocked = 0;
  for (const auto& n : m.graph().node()) {
    EXPECT_NE(n.op_type(), "QuantizeLinear");
    if (n.op_type() != "DequantizeLinear") continue;
    ++blocked;
    EXPECT_EQ(attr(n, "block_size"), 32);
    const onnx::TensorProto* codes = initializer(m.graph(), n.input(0));
    const onnx::TensorProto* scale = initializer(m.graph(), n.input(1));
    ASSERT_TRUE(codes && scale);
    EXPECT_EQ(codes->data_type(), 22) << "INT4";
    const bool gemm = codes->dims(0) == 6;  // b: [6, 24] as Gemm (transB) reads it; a: [70, 24] transposed
    const auto& f = dynamic_cast<const QuantizedConvLinear&>(*converted->get_submodule(gemm ? "b" : "a"));
    const at::Tensor want = gemm ? f.weight_codes() : f.weight_codes().t().contiguous();
    EXPECT_EQ(attr(n, "axis"), gemm ? 1 : 0) << "blocks run along the input channels";
    // Round to nearest on each block's grid: every weight within half a step.
    const at::Tensor w = (gemm ? net->b : net->a)->weight;
    const QParams& q = f.weight_qparams();
    const at::Tensor half = expand_blocks(q.scale, w.size(0), w.size(1), q.block_size) / 2;
    EXPECT_TRUE(at::le((f.weight() - w).abs(), half * (1 + 1e-5)).all().item<bool>());
    ASSERT_EQ(std::vector<int64_t>(codes->dims().begin(), codes->dims().end()), want.sizes().vec());
    const int64_t nb = gemm ? 1 : 3;
    EXPECT_EQ(std::vector<int64_t>(scale->dims().begin(), scale->dims().end()),
              (gemm ? std::vector<int64_t>{6, nb} : std::vector<int64_t>{nb, 24}));
    // Two codes per byte, the first in the low nibble, sign in bit 3 (onnx.ai "Type Int4").
    const std::string& raw = codes->raw_data();
    ASSERT_EQ(static_cast<int64_t>(raw.size()), (want.numel() + 1) / 2);
    const auto* wc = want.data_ptr<int8_t>();
    for (int64_t i = 0; i < want.numel(); ++i) {
      const int nib = (static_cast<unsigned char>(raw[static_cast<size_t>(i / 2)]) >> (i % 2 ? 4 : 0)) & 0xF;
      ASSERT_EQ(nib >= 8 ? nib - 16 : nib, wc[i]) << "element " << i;
    }
  }
  EXPECT_EQ(blocked, 2);
}

TEST(BlockWeights, ConfigErrorsNameTheKeyOrNode) {
  auto load = [](const std::string& name, const std::string& text) -> std::string {
    const auto p = std::filesystem::path(test::scratch_path()) / ("qfx_block_" + name + ".yaml");
    std::ofstream(p) << text;
    try {
      QConfigMapping::load(p.string());
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no ConfigError)";
  };
  EXPECT_NE(load("noblock", "qconfig:\n  global: {weight: {granularity: per_block}}\n").find("needs block_size"),
            std::string::npos);
  EXPECT_NE(load("nogran", "qconfig:\n  global: {weight: {block_size: 32}}\n").find("needs granularity: per_block"),
            std::string::npos);
  EXPECT_NE(load("small", "qconfig:\n  global: {weight: {granularity: per_block, block_size: 4}}\n").find("between 8 and 4096"),
            std::string::npos);
  EXPECT_NE(load("act", "qconfig:\n  global: {activation: {granularity: per_block, block_size: 32}}\n").find("for weights"),
            std::string::npos);
  EXPECT_NE(load("wfloat", "qconfig:\n  global: {weight: {dtype: float}}\n").find("dtype float is for activations"),
            std::string::npos);
  // A convolution's weight is not a 2-D [out, in] matrix: refused by node.
  auto net = std::make_shared<torch::nn::Module>();
  torch::nn::Conv2d conv = net->register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
  net->eval();
  auto gm = fx::trace_module(net, [&](std::vector<c10::IValue> in) { return conv->forward(in[0].toTensor()); },
                             {at::randn({1, 3, 8, 8})});
  QConfigMapping m = weight_only(4, 32);
  auto q = std::make_shared<QConfig>(*m.resolve("a", "Linear"));
  m.set_object_type("Conv2d", q);
  try {
    prepare_fx(*gm, m, BackendConfig::resolve("onednn"));
    FAIL() << "per_block on a conv was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("per_block granularity is for linear weights"), std::string::npos) << e.what();
  }
}

TEST(BlockWeights, TargetsSayWhetherAndWhichBlocks) {
  TensorQConfig w;
  w.per_channel = true;
  w.block_size = 32;
  w.bits = 4;
  auto reason = [&](const BackendConfig& b) -> std::string {
    try {
      resolve_tensor_qconfig(w, b, /*is_weight=*/true, /*qat=*/false, "fc");
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(reason(BackendConfig::resolve("onednn")), "");
  // example_accel lists its granularities without per_block.
  EXPECT_NE(reason(BackendConfig::resolve("example_accel")).find("lists no per_block"), std::string::npos);
  BackendConfig b = BackendConfig::resolve("onednn");
  b.weight.block_sizes = {64, 128};
  EXPECT_NE(reason(b).find("block size 32 is not one the target takes"), std::string::npos) << reason(b);
  w.block_size = 64;
  EXPECT_EQ(reason(b), "");
}
