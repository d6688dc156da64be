// ONNX opsets 18..21 on the runtime against ONNX Runtime: block-wise
// DequantizeLinear / QuantizeLinear over INT4, UINT4, INT8, UINT8, 4-bit and 16-bit
// initializers (raw_data and typed storage), MatMul / Gemm on block-wise INT4
// weights with and without QDQ activations, Reduce* with axes as an input, ops whose
// opset 18..21 versions changed, and what the runtime must refuse. The models and
// ONNX Runtime's outputs come from tests/backends/opset21_cases.py (the build's
// fixtures, folder opset21); cases.txt says how each is compared.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "../../backends/src/matmul_nbits.h"
#include "qfx/error.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/npy.h"

namespace qfx::runtime {
namespace {

const std::string kDir = std::string(QFX_FIXTURE_DIR) + "/opset21/";

struct Case {
  std::string name, mode, text;
  double tol = 0;
  int inputs = 0, int8_ops = -1;
};

std::vector<Case> cases() {
  std::ifstream f(kDir + "cases.txt");
  EXPECT_TRUE(f.good()) << kDir << "cases.txt is missing: build the fixtures (tests/backends/opset21_cases.py)";
  std::vector<Case> out;
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    std::istringstream ss(line);
    Case c;
    ss >> c.name >> c.mode >> c.tol >> c.inputs >> c.int8_ops;
    std::getline(ss >> std::ws, c.text);
    out.push_back(c);
  }
  return out;
}

// Element i of a numeric tensor as double.
double at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[i];
    case DType::kInt8: return t.data<int8_t>()[i];
    case DType::kUInt8: case DType::kBool: return t.data<uint8_t>()[i];
    case DType::kInt16: return t.data<int16_t>()[i];
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
  }
  return 0;
}

// Compares qfx's output with ONNX Runtime's as the case's mode says; "" when they agree.
std::string compare(const Case& c, const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return "shape " + got.describe() + " vs ONNX Runtime's " + want.describe();
  if (got.dtype() != want.dtype()) return std::string("dtype ") + dtype_name(got.dtype()) + " vs " + dtype_name(want.dtype());
  double largest = 1;
  for (int64_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::fabs(at(want, i)));
  const Tensor bound = c.mode == "bound" ? load_npy(kDir + c.name + ".tol.npy") : Tensor();
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = at(got, i), b = at(want, i), d = std::fabs(a - b);
    const double limit = c.mode == "exact" ? 0 : c.mode == "rel" ? c.tol * largest : c.mode == "units" ? c.tol : at(bound, i);
    const bool same = c.mode == "exact" ? (a == b || (std::isnan(a) && std::isnan(b))) : d <= limit;
    if (!same) {
      std::ostringstream o;
      o << "element " << i << ": qfx " << a << ", ONNX Runtime " << b << " (difference " << d << ", limit " << limit << ")";
      return o.str();
    }
  }
  return "";
}

std::map<std::string, Tensor> inputs_of(const Case& c, const Model& m) {
  std::map<std::string, Tensor> in;
  for (int k = 0; k < c.inputs; ++k) in[m.inputs()[static_cast<size_t>(k)].name] = load_npy(kDir + c.name + ".in" + std::to_string(k) + ".npy");
  return in;
}

TEST(Opset21, ModelsMatchOnnxRuntime) {
  const std::vector<Case> all = cases();
  ASSERT_GT(all.size(), 40u);
  int run = 0;
  for (const Case& c : all) {
    if (c.mode == "refuses") continue;
    const Tensor want = load_npy(kDir + c.name + ".ort.npy");
    for (const char* backend : {"reference", "onednn"}) {
      SCOPED_TRACE(c.name + " on " + backend);
      try {
        const Model m = Model::load(kDir + c.name + ".onnx", ModelOptions(backend));
        if (c.int8_ops >= 0) EXPECT_EQ(m.int8_ops(), c.int8_ops);
        auto out = m.run(inputs_of(c, m));
        EXPECT_EQ(compare(c, out.at("y"), want), "");
        ++run;
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
      }
    }
  }
  EXPECT_EQ(run % 2, 0);
}

// The MatMul cases whose weight is a block-wise DequantizeLinear of initializers.
std::vector<std::string> blocked_matmul_cases() {
  std::vector<std::string> names;
  for (const Case& c : cases())
    if (c.name.rfind("matmul_w", 0) == 0 && c.name.find("qdq") == std::string::npos) names.push_back(c.name);
  return names;
}

// A MatMul by a block-wise DequantizeLinear of initializers becomes MatMulNBits: the
// weight stays packed, and for up to 4 rows the onednn backend runs the packed
// kernel ("simd"), for more the float matmul on the weight dequantized once ("dequantized").
// It never becomes an int8 op.
TEST(Opset21, BlockwiseMatMulWeightsStayPacked) {
  const auto names = blocked_matmul_cases();
  ASSERT_GE(names.size(), 8u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const Model m = Model::load(kDir + name + ".onnx", ModelOptions("onednn"));
    EXPECT_EQ(m.int8_ops(), 0);
    const std::vector<KernelChoice> ks = m.kernel_report();
    ASSERT_EQ(ks.size(), 1u) << "the DequantizeLinear is fused into the MatMul";
    EXPECT_EQ(ks[0].op, "MatMulNBits");
    const Tensor x = load_npy(kDir + name + ".in0.npy");
    const int64_t rows = x.numel() / x.shape().back();
    EXPECT_EQ(ks[0].impl, rows <= 4 ? "simd" : "dequantized") << rows << " rows";
  }
  // A Gemm's block-wise weight is dequantized once, when the model is planned (a
  // folded float constant), and the Gemm runs in float.
  const Model gemm = Model::load(kDir + "gemm_wint4_transb.onnx", ModelOptions("onednn"));
  bool weight_folded = false, gemm_float = false;
  for (const KernelChoice& k : gemm.kernel_report()) {
    if (k.op == "DequantizeLinear" && k.inputs.empty()) weight_folded = k.folded;
    if (k.op == "Gemm") gemm_float = !k.folded && k.dtype == "float32";
  }
  EXPECT_TRUE(weight_folded);
  EXPECT_TRUE(gemm_float);
  // With QDQ activations around it the group is reported as staying float, and why.
  const Model m = Model::load(kDir + "matmul_wint4_qdq_u8.onnx", ModelOptions("reference"));
  EXPECT_EQ(m.int8_ops(), 0);
  ASSERT_EQ(m.float_fallbacks().size(), 1u);
  EXPECT_NE(m.float_fallbacks()[0].find("weights are a DequantizeLinear with block_size 32; runs in float"), std::string::npos)
      << m.float_fallbacks()[0];
}

// The packed width: 4 bits where every code and zero point fits 16 consecutive
// values (INT4 / UINT4 weights in blocks of an even size), else 8.
TEST(Opset21, BlockwiseMatMulWeightsArePacked4BitsWideWhereTheyFit) {
  int checked = 0;
  for (const std::string& name : blocked_matmul_cases()) {
    SCOPED_TRACE(name);
    ir::Graph g = ir::load_onnx(kDir + name + ".onnx");
    ir::fuse_blocked_matmuls(g, {});
    ASSERT_EQ(g.nodes.size(), 1u);
    const ir::Node& n = g.nodes[0];
    ASSERT_EQ(n.op, "MatMulNBits");
    const bool four = (name.find("int4") != std::string::npos) && name.find("_b33_") == std::string::npos;
    EXPECT_EQ(n.attr_i("bits", 0), four ? 4 : 8);
    const Tensor& B = g.initializers.at(n.inputs[1]);
    const int64_t K = n.attr_i("K", 0), N = n.attr_i("N", 0), bs = n.attr_i("block_size", 0);
    EXPECT_EQ(B.numel(), N * ((K + bs - 1) / bs) * bs * (four ? 4 : 8) / 8);
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

// The fusion changes no value on the reference backend: the packed codes (4 bits
// wide where every code fits, else 8, signed types offset) dequantize to exactly
// the DequantizeLinear's weights, and the same float MatMul runs on them.
TEST(Opset21, BlockwiseMatMulFusionIsExactOnTheReference) {
  for (const std::string& name : blocked_matmul_cases()) {
    SCOPED_TRACE(name);
    const Model fused = Model::load(kDir + name + ".onnx", ModelOptions("reference"));
    const Model plain = Model::load(kDir + name + ".onnx", ModelOptions("reference", /*fuse=*/false));
    ASSERT_EQ(fused.kernel_report().at(0).op, "MatMulNBits");
    ASSERT_EQ(plain.kernel_report().back().op, "MatMul");
    const auto in = inputs_of(Case{name, "bound", "", 0, 1}, fused);
    const Tensor a = fused.run(in).at("y"), b = plain.run(in).at("y");
    ASSERT_EQ(a.shape(), b.shape());
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << "element " << i;
  }
}

// ONNX Runtime's MatMulNBits with accuracy_level 4 (int8 activations), written by
// its own quantizer: ModelsMatchOnnxRuntime checks qfx against the definition
// (opset21_cases.py computes it) bit for bit on both backends; here, that the onednn
// backend's vectorised kernel ran where it takes the layout, and that ONNX Runtime's
// own kernels agree within their different summation order.
TEST(Opset21, Int8ActivationMatMulNBitsAgreesWithOnnxRuntime) {
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.name.rfind("matmul_nbits_int8_", 0) != 0) continue;
    SCOPED_TRACE(c.name);
    const Model m = Model::load(kDir + c.name + ".onnx", ModelOptions("onednn"));
    const KernelChoice& k = m.kernel_report().at(0);
    ASSERT_EQ(k.op, "MatMulNBits");
    // The vectorised kernel: 4-bit codes in blocks of a multiple of 32, AVX2 (not
    // where QFX_SIMD_ISA caps the kernels at baseline x86-64).
    const char* isa = std::getenv("QFX_SIMD_ISA");
    const bool vector_layout = c.name.find("_4bit") != std::string::npos && c.name.find("_b16_") == std::string::npos &&
                               !(isa && std::string(isa) == "baseline") && __builtin_cpu_supports("avx2");
    EXPECT_EQ(k.impl, vector_layout ? "simd" : "reference");
    const Tensor got = m.run(inputs_of(c, m)).at("y"), ort = load_npy(kDir + c.name + ".onnxruntime.npy");
    ASSERT_EQ(got.shape(), ort.shape());
    double largest = 0, worst = 0;
    for (int64_t i = 0; i < ort.numel(); ++i) largest = std::max(largest, std::fabs(double{ort.data<float>()[i]}));
    for (int64_t i = 0; i < ort.numel(); ++i) worst = std::max(worst, std::fabs(double{got.data<float>()[i]} - ort.data<float>()[i]));
    EXPECT_LE(worst, 1e-5 * largest);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(Opset21, RefusesWhatItDoesNotImplement) {
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.mode != "refuses") continue;
    SCOPED_TRACE(c.name);
    try {
      Model::load(kDir + c.name + ".onnx", ModelOptions("reference"));
      ADD_FAILURE() << "loaded; expected an error holding: " << c.text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.text), std::string::npos) << e.what();
    }
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

}  // namespace
}  // namespace qfx::runtime
