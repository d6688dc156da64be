// The onednn backend's vectorised kernels (simd/) and its int8 MaxPool against the
// reference kernels, op by op, on random shapes and values, edge values included
// (NaN, +-inf, huge, exact ties, infinite Clip bounds). Equality is exact: these
// kernels promise the reference's arithmetic bit for bit. ctest runs this file once
// per instruction set the build dispatches to (QFX_SIMD_ISA=baseline|avx2|avx512,
// DNNL_MAX_CPU_ISA for oneDNN); each run prints the path it exercised.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "../../backends/src/kernels.h"

using namespace qfx::runtime;

namespace {

Shape random_shape(std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> d(1, 9);
  Shape s = {d(rng), d(rng), d(rng), d(rng) * 7};  // up to ~40k elements: vector bodies and tails
  return s;
}

Tensor random_codes(const Shape& s, DType dt, std::mt19937& rng) {
  Tensor t(s, dt);
  std::uniform_int_distribution<int> d(0, 255);
  auto* p = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(d(rng));
  return t;
}

// Floats with the values that break vectorised code: NaN, +-inf, huge, exact
// half-way points of `scale`, and ordinary ones.
Tensor random_floats(const Shape& s, float scale, std::mt19937& rng) {
  Tensor t(s, DType::kFloat32);
  std::normal_distribution<float> nd(0.0f, 100.0f * scale);
  std::uniform_int_distribution<int> pick(0, 19), code(-300, 300);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (pick(rng)) {
      case 0: p[i] = std::numeric_limits<float>::quiet_NaN(); break;
      case 1: p[i] = std::numeric_limits<float>::infinity(); break;
      case 2: p[i] = -std::numeric_limits<float>::infinity(); break;
      case 3: p[i] = 3e38f; break;
      case 4: p[i] = (static_cast<float>(code(rng)) + 0.5f) * scale; break;
      default: p[i] = nd(rng);
    }
  }
  return t;
}

Tensor scalar_f(float v) {
  Tensor t({}, DType::kFloat32);
  t.data<float>()[0] = v;
  return t;
}

Tensor scalar_q(int32_t v, DType dt) {
  Tensor t({}, dt);
  if (dt == DType::kUInt8) t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  else t.data<int8_t>()[0] = static_cast<int8_t>(v);
  return t;
}

// Bytes equal, NaN payloads included (float outputs compare as bits).
bool bit_equal(const Tensor& a, const Tensor& b, int64_t* first_diff) {
  const auto* x = static_cast<const uint8_t*>(a.raw());
  const auto* y = static_cast<const uint8_t*>(b.raw());
  const size_t es = a.nbytes() / static_cast<size_t>(std::max<int64_t>(a.numel(), 1));
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(x + i * static_cast<int64_t>(es), y + i * static_cast<int64_t>(es), es) != 0) {
      *first_diff = i;
      return false;
    }
  return true;
}

// Builds `n` on the reference and on onednn, checks which implementation onednn
// chose, runs both and compares bit for bit.
void expect_same(const ir::Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts,
                 const std::vector<const Tensor*>& inputs, const std::string& want_impl, const std::string& what) {
  Kernel ref = make_kernel(n, in, consts, "reference");
  Kernel fast = make_kernel(n, in, consts, "onednn");
  ASSERT_EQ(fast.impl, want_impl) << what << ": the onednn backend did not pick the kernel under test";
  Tensor a(ref.outputs[0].shape, ref.outputs[0].dtype), b(fast.outputs[0].shape, fast.outputs[0].dtype);
  ref.run(inputs, {&a});
  fast.run(inputs, {&b});
  ASSERT_EQ(a.shape(), b.shape()) << what;
  int64_t i = -1;
  EXPECT_TRUE(bit_equal(a, b, &i)) << what << ": first difference at element " << i;
}

// The same 4-D tensor stored channels last (8-bit codes).
Tensor to_nhwc(const Tensor& x) {
  const Shape& xs = x.shape();
  Tensor y(xs, x.dtype());
  const int64_t N = xs[0], C = xs[1], HW = xs[2] * xs[3];
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < HW; ++p)
        static_cast<uint8_t*>(y.raw())[(b * HW + p) * C + c] = static_cast<const uint8_t*>(x.raw())[(b * C + c) * HW + p];
  return y;
}

ir::Attr ints_attr(std::vector<int64_t> v) {
  ir::Attr a;
  a.kind = ir::Attr::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

ir::QInfo q(float scale, int32_t zp, DType dt) {
  ir::QInfo r;
  r.scale = {scale};
  r.zero_point = {zp};
  r.dtype = dt;
  return r;
}

}  // namespace

TEST(SimdKernels, ReportsTheInstructionSetUnderTest) {
  const std::string isa = simd_isa();
  const char* env = std::getenv("QFX_SIMD_ISA");
  std::printf("vectorised kernels: %s (QFX_SIMD_ISA=%s); oneDNN: DNNL_MAX_CPU_ISA=%s\n", isa.c_str(), env ? env : "",
              std::getenv("DNNL_MAX_CPU_ISA") ? std::getenv("DNNL_MAX_CPU_ISA") : "");
  if (env && std::string(env) == "baseline") EXPECT_EQ(isa, "baseline");
  if (env && std::string(env) == "avx2" && __builtin_cpu_supports("avx2")) EXPECT_EQ(isa, "avx2");
  if (env && std::string(env) == "avx512" && __builtin_cpu_supports("avx512f")) EXPECT_EQ(isa, "avx512");
}

TEST(SimdKernels, QuantizeLinearEqualsReference) {
  std::mt19937 rng(1);
  for (int rep = 0; rep < 12; ++rep) {
    const DType dt = rep % 2 ? DType::kInt8 : DType::kUInt8;
    const float scale = rep % 3 == 0 ? 0.0173f : 0.5f;
    const int32_t zp = dt == DType::kUInt8 ? 3 + rep * 10 : -5 + rep;
    const Shape s = random_shape(rng);
    Tensor x = random_floats(s, scale, rng), sc = scalar_f(scale), z = scalar_q(zp, dt);
    ir::Node n;
    n.op = "QuantizeLinear";
    n.name = "q";
    n.inputs = {"x", "s", "z"};
    n.outputs = {"y"};
    expect_same(n, {{s, DType::kFloat32}}, {nullptr, &sc, &z}, {&x}, "simd", "QuantizeLinear rep " + std::to_string(rep));
  }
}

TEST(SimdKernels, QLinearAddAndMulEqualReference) {
  std::mt19937 rng(2);
  const float inf = std::numeric_limits<float>::infinity();
  for (const char* op : {"QLinearAdd", "QLinearMul"})
    for (int rep = 0; rep < 8; ++rep) {
      const Shape s = random_shape(rng);
      Tensor a = random_codes(s, DType::kUInt8, rng), b = random_codes(s, DType::kUInt8, rng);
      ir::Node n;
      n.op = op;
      n.name = "qb";
      n.inputs = {"a", "b"};
      n.outputs = {"y"};
      n.in_q = {q(0.02f + 0.01f * static_cast<float>(rep), 120, DType::kUInt8), q(0.05f, 7 * rep, DType::kUInt8)};
      n.out_q = q(std::string(op) == "QLinearMul" ? 0.3f : 0.04f, 100 + rep, DType::kUInt8);
      const char* acts[] = {"", "Relu", "Clip", "Clip"};
      n.fused_act = acts[rep % 4];
      n.clip_lo = rep % 4 == 3 ? -inf : 0.0f;  // Clip without min / max: infinite bounds
      n.clip_hi = rep % 4 == 3 ? inf : 6.0f;
      expect_same(n, {{s, DType::kUInt8}, {s, DType::kUInt8}}, {}, {&a, &b}, "simd",
                  std::string(op) + " act '" + n.fused_act + "' rep " + std::to_string(rep));
    }
}

// Squeeze-excitation: a 4-D tensor times (or plus) a per-channel gate [N, C, 1, 1], the
// gate first or second, in plain and channels-last layouts.
TEST(SimdKernels, QLinearMulWithChannelGateEqualsReference) {
  std::mt19937 rng(12);
  for (const char* op : {"QLinearMul", "QLinearAdd"})
    for (int rep = 0; rep < 8; ++rep) {
      std::uniform_int_distribution<int64_t> d(1, 7);
      const Shape xs = {d(rng), d(rng) * 3, d(rng) + 1, d(rng) * 5}, gs = {xs[0], xs[1], 1, 1};
      Tensor x = random_codes(xs, DType::kUInt8, rng), g = random_codes(gs, DType::kUInt8, rng);
      const bool gate_first = rep % 2 == 1;
      ir::Node n;
      n.op = op;
      n.name = "se";
      n.inputs = {"a", "b"};
      n.outputs = {"y"};
      ir::QInfo qx = q(0.03f + 0.01f * static_cast<float>(rep), 7 * rep, DType::kUInt8), qg = q(1.0f / 255.0f, 0, DType::kUInt8);
      n.in_q = gate_first ? std::vector<ir::QInfo>{qg, qx} : std::vector<ir::QInfo>{qx, qg};
      n.out_q = q(0.05f, 3 * rep, DType::kUInt8);
      n.fused_act = rep % 4 == 2 ? "Relu" : "";
      const std::vector<Meta> metas = gate_first ? std::vector<Meta>{{gs, DType::kUInt8}, {xs, DType::kUInt8}}
                                                 : std::vector<Meta>{{xs, DType::kUInt8}, {gs, DType::kUInt8}};
      const std::vector<const Tensor*> ins = gate_first ? std::vector<const Tensor*>{&g, &x} : std::vector<const Tensor*>{&x, &g};
      const std::string what = std::string(op) + (gate_first ? " gate first" : " gate second") + " rep " + std::to_string(rep);
      expect_same(n, metas, {}, ins, "simd", what);
      // Channels last: the full input NHWC, the output NHWC, equal to the reference's once made plain.
      Tensor x_nhwc = to_nhwc(x);
      std::vector<Meta> nm = metas;
      nm[gate_first ? 1 : 0].nhwc = true;
      Kernel fast = make_kernel(n, nm, {}, "onednn", /*nhwc_out=*/true);
      ASSERT_EQ(fast.impl, "simd") << what;
      ASSERT_TRUE(fast.outputs[0].nhwc) << what;
      Kernel ref = make_kernel(n, metas, {}, "reference");
      Tensor want(xs, DType::kUInt8), got(xs, DType::kUInt8), plain(xs, DType::kUInt8);
      ref.run(ins, {&want});
      fast.run(gate_first ? std::vector<const Tensor*>{&g, &x_nhwc} : std::vector<const Tensor*>{&x_nhwc, &g}, {&got});
      nhwc_to_nchw(got.raw(), plain.raw(), xs, 1);
      int64_t i = -1;
      EXPECT_TRUE(bit_equal(want, plain, &i)) << what << " (channels last): first difference at element " << i;
    }
}

// Attention's int8 matmuls: two 8-bit activations (u8 or s8, any zero points), batch
// dims broadcast as MatMul, rows long enough for the vector bodies and their tails.
TEST(SimdKernels, QLinearMatMulOfActivationsEqualsReference) {
  std::mt19937 rng(13);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 4, 16, 8}, {2, 4, 8, 16}}, {{3, 17, 33}, {3, 33, 5}}, {{2, 1, 9, 70}, {1, 3, 70, 11}}, {{6, 300}, {300, 7}}};
  int rep = 0;
  for (const auto& [as, bs] : shapes)
    for (DType bd : {DType::kUInt8, DType::kInt8}) {
      Tensor a = random_codes(as, DType::kUInt8, rng), b = random_codes(bs, bd, rng);
      ir::Node n;
      n.op = "QLinearMatMul";
      n.name = "attn";
      n.inputs = {"a", "as", "az", "b", "bs", "bz", "ys", "yz"};
      n.outputs = {"y"};
      n.in_q = {q(0.02f, 100 + rep, DType::kUInt8), q(0.01f, bd == DType::kInt8 ? -3 : 128, bd)};
      n.out_q = q(0.05f * static_cast<float>(rep + 1), rep % 2 ? -7 : 120, rep % 2 ? DType::kInt8 : DType::kUInt8);
      expect_same(n, {{as, DType::kUInt8}, {bs, bd}}, {nullptr, nullptr}, {&a, &b}, "simd",
                  "QLinearMatMul " + std::to_string(rep));
      ++rep;
    }
}

// Tables (Sigmoid, SiLU, HardSwish under ONNX's arithmetic) and int8 global average
// pooling, u8 and s8, plain and channels last.
TEST(SimdKernels, QLutAndGlobalAveragePoolEqualReference) {
  std::mt19937 rng(14);
  for (int rep = 0; rep < 8; ++rep) {
    const DType xd = rep % 2 ? DType::kInt8 : DType::kUInt8, yd = rep % 4 < 2 ? DType::kUInt8 : DType::kInt8;
    std::uniform_int_distribution<int64_t> d(1, 9);
    const Shape xs = {d(rng), d(rng) * 4, d(rng) + 2, d(rng) * 3};
    Tensor x = random_codes(xs, xd, rng);
    ir::Node lut;
    lut.op = "QLut";
    lut.name = "table";
    lut.inputs = {"x"};
    lut.outputs = {"y"};
    lut.in_q = {q(0.1f, 0, xd)};
    lut.out_q = q(0.1f, 0, yd);
    ir::Attr t;
    t.kind = ir::Attr::Kind::kInts;
    std::uniform_int_distribution<int> code(yd == DType::kInt8 ? -128 : 0, yd == DType::kInt8 ? 127 : 255);
    for (int i = 0; i < 256; ++i) t.ints.push_back(code(rng));
    lut.attrs["table"] = t;
    expect_same(lut, {{xs, xd}}, {nullptr}, {&x}, "simd", "QLut rep " + std::to_string(rep));
    ir::Node gap;
    gap.op = "QLinearGlobalAveragePool";
    gap.name = "gap";
    gap.inputs = {"x", "xs", "xz", "ys", "yz"};
    gap.outputs = {"y"};
    gap.in_q = {q(0.05f + 0.01f * static_cast<float>(rep), xd == DType::kInt8 ? -3 * rep : 10 * rep, xd)};
    gap.out_q = q(0.02f, yd == DType::kInt8 ? rep : 128 - rep, yd);
    expect_same(gap, {{xs, xd}}, {nullptr}, {&x}, "simd", "QLinearGlobalAveragePool rep " + std::to_string(rep));
    // Channels last in.
    Tensor x_nhwc = to_nhwc(x);
    Meta m{xs, xd};
    m.nhwc = true;
    Kernel fast = make_kernel(gap, {m}, {nullptr}, "onednn", true), ref = make_kernel(gap, {{xs, xd}}, {nullptr}, "reference");
    ASSERT_EQ(fast.impl, "simd");
    Tensor want(ref.outputs[0].shape, yd), got(fast.outputs[0].shape, yd);
    ref.run({&x}, {&want});
    fast.run({&x_nhwc}, {&got});
    int64_t i = -1;
    EXPECT_TRUE(bit_equal(want, got, &i)) << "QLinearGlobalAveragePool channels last rep " << rep << ": element " << i;
  }
}

TEST(SimdKernels, QReluAndQClipEqualReference) {
  std::mt19937 rng(3);
  const float inf = std::numeric_limits<float>::infinity();
  for (DType dt : {DType::kUInt8, DType::kInt8})
    for (int rep = 0; rep < 6; ++rep) {
      const Shape s = random_shape(rng);
      Tensor x = random_codes(s, dt, rng);
      ir::Node n;
      n.op = rep < 2 ? "QRelu" : "QClip";
      n.name = "qu";
      n.inputs = {"x"};
      n.outputs = {"y"};
      const int32_t zx = dt == DType::kUInt8 ? 128 : 0;
      n.in_q = {q(0.1f, zx, dt)};
      n.out_q = q(0.1f, zx, dt);
      n.fused_act = rep < 2 ? "Relu" : "Clip";
      const float bounds[][2] = {{0, 6}, {0, 6}, {-1.5f, 2.5f}, {-inf, 3.0f}, {0.0f, inf}, {-inf, inf}};
      n.clip_lo = bounds[rep][0];
      n.clip_hi = bounds[rep][1];
      expect_same(n, {{s, dt}}, {}, {&x}, "simd", n.op + " [" + std::to_string(n.clip_lo) + ", " + std::to_string(n.clip_hi) + "]");
    }
}

TEST(SimdKernels, FloatAddReluClipEqualReference) {
  std::mt19937 rng(4);
  const float inf = std::numeric_limits<float>::infinity();
  for (int rep = 0; rep < 6; ++rep) {
    const Shape s = random_shape(rng);
    Tensor a = random_floats(s, 0.1f, rng), b = random_floats(s, 0.1f, rng);
    ir::Node add;
    add.op = "Add";
    add.name = "add";
    add.inputs = {"a", "b"};
    add.outputs = {"y"};
    add.fused_act = rep % 3 == 0 ? "" : rep % 3 == 1 ? "Relu" : "Clip";
    add.clip_lo = 0.0f;
    add.clip_hi = rep == 5 ? inf : 6.0f;
    expect_same(add, {{s, DType::kFloat32}, {s, DType::kFloat32}}, {}, {&a, &b}, "simd", "Add act '" + add.fused_act + "'");
    ir::Node relu;
    relu.op = "Relu";
    relu.name = "relu";
    relu.inputs = {"x"};
    relu.outputs = {"y"};
    expect_same(relu, {{s, DType::kFloat32}}, {}, {&a}, "simd", "Relu");
    Tensor lo = scalar_f(rep == 4 ? -inf : -1.0f), hi = scalar_f(rep == 3 ? inf : 2.0f);
    ir::Node clip;
    clip.op = "Clip";
    clip.name = "clip";
    clip.inputs = {"x", "lo", rep == 2 ? "" : "hi"};  // rep 2: Clip without max
    clip.outputs = {"y"};
    expect_same(clip, {{s, DType::kFloat32}}, {nullptr, &lo, rep == 2 ? nullptr : &hi}, {&a}, "simd", "Clip rep " + std::to_string(rep));
  }
}

TEST(SimdKernels, FloatAddOfARowBroadcastAlongTheLastDimEqualsReference) {
  std::mt19937 rng(7);
  for (int rep = 0; rep < 4; ++rep) {
    const Shape s = {2, 5 + rep, 3 + 7 * rep};
    const Shape row = rep % 2 ? Shape{1, 1, s.back()} : Shape{s.back()};
    Tensor x = random_floats(s, 0.1f, rng), b = random_floats(row, 0.1f, rng);
    ir::Node add;
    add.op = "Add";
    add.name = "add";
    add.outputs = {"y"};
    add.fused_act = rep == 3 ? "Relu" : "";
    add.inputs = {"x", "b"};
    expect_same(add, {{s, DType::kFloat32}, {row, DType::kFloat32}}, {}, {&x, &b}, "simd", "x + row, rep " + std::to_string(rep));
    add.inputs = {"b", "x"};
    expect_same(add, {{row, DType::kFloat32}, {s, DType::kFloat32}}, {}, {&b, &x}, "simd", "row + x, rep " + std::to_string(rep));
  }
}

// MatMul of a [N, L, K] sequence by a constant [K, M] weight on oneDNN's inner
// product: the reference's result up to float summation order.
TEST(SimdKernels, FloatMatMulByAConstantWeightRunsOnOneDnn) {
  std::mt19937 rng(8);
  const Shape s = {3, 11, 40}, ws = {40, 24};  // 33 rows: oneDNN's inner product
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor x(s, DType::kFloat32), w(ws, DType::kFloat32);
  for (Tensor* t : {&x, &w})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = nd(rng);
  ir::Node mm;
  mm.op = "MatMul";
  mm.name = "mm";
  mm.inputs = {"x", "w"};
  mm.outputs = {"y"};
  const std::vector<Meta> in = {{s, DType::kFloat32}, {ws, DType::kFloat32}};
  Kernel ref = make_kernel(mm, in, {nullptr, &w}, "reference");
  Kernel fast = make_kernel(mm, in, {nullptr, &w}, "onednn");
  ASSERT_EQ(fast.impl, "onednn");
  Tensor a(ref.outputs[0].shape, DType::kFloat32), b(fast.outputs[0].shape, DType::kFloat32);
  ASSERT_EQ(b.shape(), (Shape{3, 11, 24}));
  ref.run({&x, &w}, {&a});
  fast.run({&x, &w}, {&b});
  ASSERT_GT(std::abs(a.data<float>()[0]) + std::abs(a.data<float>()[1]), 0.0f) << "the reference computed nothing";
  float worst = 0, largest = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    worst = std::max(worst, std::abs(a.data<float>()[i] - b.data<float>()[i]));
    largest = std::max(largest, std::abs(a.data<float>()[i]));
  }
  EXPECT_LT(worst, 1e-5f * largest);
}

// Up to 4 rows run the panel kernel (simd/gemv.cpp), 5 and more oneDNN's inner
// product; both within the bound of a float32 dot product of length K summed in
// any order (each within K 2^-24 sum |x w| of the exact value, so twice that of each
// other), over whole 16-column panels and the columns past them.
TEST(SimdKernels, FloatMatMulOfFewRowsRunsThePanelKernelWithinTheSummationBound) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t K = 300, N = 37;  // two panels and 5 columns past them
  Tensor w({K, N}, DType::kFloat32);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = nd(rng);
  for (int64_t rows : {1, 2, 3, 4, 5}) {
    const Shape s = {1, rows, K};
    Tensor x(s, DType::kFloat32);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
    ir::Node mm;
    mm.op = "MatMul";
    mm.name = "mm";
    mm.inputs = {"x", "w"};
    mm.outputs = {"y"};
    const std::vector<Meta> in = {{s, DType::kFloat32}, {{K, N}, DType::kFloat32}};
    Kernel ref = make_kernel(mm, in, {nullptr, &w}, "reference");
    Kernel fast = make_kernel(mm, in, {nullptr, &w}, "onednn");
    EXPECT_EQ(fast.impl, rows <= 4 ? "simd" : "onednn") << rows << " rows";
    Tensor a(ref.outputs[0].shape, DType::kFloat32), b(fast.outputs[0].shape, DType::kFloat32);
    ASSERT_EQ(b.shape(), (Shape{1, rows, N}));
    ref.run({&x, &w}, {&a});
    fast.run({&x, &w}, {&b});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < N; ++c) {
        double mag = 0;
        for (int64_t k = 0; k < K; ++k) mag += std::abs(double{x.data<float>()[r * K + k]} * w.data<float>()[k * N + c]);
        const double bound = 2.0 * static_cast<double>(K) * std::ldexp(1.0, -24) * mag;
        EXPECT_LE(std::abs(double{a.data<float>()[r * N + c]} - b.data<float>()[r * N + c]), bound) << rows << " rows, row " << r << ", column " << c;
      }
  }
}

TEST(SimdKernels, Int8MaxPoolRunsOnOneDnnAndEqualsReference) {
  std::mt19937 rng(5);
  for (DType dt : {DType::kUInt8, DType::kInt8})
    for (int rep = 0; rep < 4; ++rep) {
      std::uniform_int_distribution<int64_t> d(5, 17);
      const Shape s = {2, d(rng), d(rng), d(rng)};
      Tensor x = random_codes(s, dt, rng);
      ir::Node n;
      n.op = "MaxPool";
      n.name = "pool";
      n.inputs = {"x"};
      n.outputs = {"y"};
      const int64_t k = 2 + rep % 2, st = 1 + rep / 2, p = rep % 2;
      n.attrs["kernel_shape"] = ints_attr({k, k});
      n.attrs["strides"] = ints_attr({st, st});
      n.attrs["pads"] = ints_attr({p, p, p, p});
      expect_same(n, {{s, dt}}, {}, {&x}, "onednn", "int8 MaxPool k" + std::to_string(k) + " s" + std::to_string(st));
    }
}

// The reference's comparison, logic and Where kernels against the expectation
// written out here, with ONNX (numpy) broadcasting.
TEST(ReferenceKernels, ComparisonsLogicAndWhereBroadcast) {
  const Shape s = {2, 3}, row = {3};
  Tensor a(s, DType::kFloat32), b(row, DType::kFloat32), c(s, DType::kFloat32), zero({}, DType::kFloat32);
  const float av[] = {-1, 0, 2, 3, -4, 5}, bv[] = {0, 0, 3};
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = av[i], c.data<float>()[i] = 10.0f * static_cast<float>(i);
  for (int i = 0; i < 3; ++i) b.data<float>()[i] = bv[i];
  zero.data<float>()[0] = -1.0f;
  auto node = [](const std::string& op, std::vector<std::string> ins) {
    ir::Node n;
    n.op = op;
    n.name = op;
    n.inputs = std::move(ins);
    n.outputs = {"y"};
    return n;
  };
  Kernel gt = make_kernel(node("Greater", {"a", "b"}), {{s, DType::kFloat32}, {row, DType::kFloat32}}, {}, "reference");
  ASSERT_EQ(gt.outputs[0].dtype, DType::kBool);
  Tensor m(s, DType::kBool);
  gt.run({&a, &b}, {&m});
  const uint8_t want_gt[] = {0, 0, 0, 1, 0, 1};  // a > b row-wise
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<const uint8_t*>(m.raw())[i], want_gt[i]) << "Greater at " << i;
  Kernel nt = make_kernel(node("Not", {"m"}), {{s, DType::kBool}}, {}, "reference");
  Tensor nm(s, DType::kBool);
  nt.run({&m}, {&nm});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<const uint8_t*>(nm.raw())[i], 1 - want_gt[i]) << "Not at " << i;
  Kernel wh = make_kernel(node("Where", {"m", "c", "z"}), {{s, DType::kBool}, {s, DType::kFloat32}, {{}, DType::kFloat32}}, {}, "reference");
  Tensor y(s, DType::kFloat32);
  wh.run({&m, &c, &zero}, {&y});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.data<float>()[i], want_gt[i] ? 10.0f * static_cast<float>(i) : -1.0f) << "Where at " << i;
  Kernel pw = make_kernel(node("Pow", {"a", "b"}), {{s, DType::kFloat32}, {row, DType::kFloat32}}, {}, "reference");
  Tensor p(s, DType::kFloat32);
  pw.run({&a, &b}, {&p});
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(p.data<float>()[i], std::pow(av[i], bv[i % 3])) << "Pow at " << i;
}
