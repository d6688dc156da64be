// Reference kernels: Conv, QLinearConv, ConvTranspose, Gemm, MatMul, QGemm, QLinearMatMul
// (float and int32-accumulating integer loops).
#include <type_traits>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// --- Conv (float and int8) ------------------------------------------------------

// a + b in TAcc; int32 two's complement (the int32 accumulator of ONNX's integer ops,
// as ONNX Runtime and int32 hardware add: no undefined overflow).
template <typename TAcc>
inline TAcc acc_add(TAcc a, TAcc b) {
  if constexpr (std::is_same_v<TAcc, int32_t>) return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  else return a + b;
}

// `acc` is scratch for one output plane ([oH * oW]), owned by the kernel; it starts at
// the bias (int32 accumulators wrap, see acc_add).
template <typename TX, typename TW, typename TAcc, typename Store>
void conv_loops(const Geom& g, const TX* x, const TW* w, TAcc x_zero, const std::vector<TAcc>& w_zero,
                const std::vector<TAcc>& bias, std::vector<TAcc>& acc, Store&& store) {
  const int64_t cg = g.C / g.group, mg = g.M / g.group;
  for (int64_t nb = 0; nb < g.N; ++nb) {
    for (int64_t m = 0; m < g.M; ++m) {
      const int64_t gi = m / mg;
      std::fill(acc.begin(), acc.end(), bias.empty() ? TAcc(0) : bias[static_cast<size_t>(m)]);
      const TAcc wz = w_zero.empty() ? TAcc(0) : w_zero[w_zero.size() == 1 ? 0 : static_cast<size_t>(m)];
      for (int64_t c = 0; c < cg; ++c) {
        const TX* xp = x + ((nb * g.C) + gi * cg + c) * g.H * g.W;
        const TW* wp = w + ((m * cg) + c) * g.kH * g.kW;
        for (int64_t kh = 0; kh < g.kH; ++kh) {
          int64_t oh0, oh1;
          valid_range(kh, g.sH, g.dH, g.pT, g.H, g.oH, &oh0, &oh1);
          for (int64_t kw = 0; kw < g.kW; ++kw) {
            const TAcc wv = static_cast<TAcc>(wp[kh * g.kW + kw]) - wz;
            int64_t ow0, ow1;
            valid_range(kw, g.sW, g.dW, g.pL, g.W, g.oW, &ow0, &ow1);
            for (int64_t oh = oh0; oh < oh1; ++oh) {
              const TX* row = xp + (oh * g.sH + kh * g.dH - g.pT) * g.W + kw * g.dW - g.pL;
              TAcc* ap = acc.data() + oh * g.oW;
              for (int64_t ow = ow0; ow < ow1; ++ow) ap[ow] = acc_add(ap[ow], (static_cast<TAcc>(row[ow * g.sW]) - x_zero) * wv);
            }
          }
        }
      }
      store(nb, m, acc.data());
    }
  }
}

Kernel conv(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  if (in.size() < 2) bad_shape(n, "needs input and weight");
  if (in[0].dtype != DType::kFloat32) unsupported(n, "float Conv needs float32 input");
  const Tensor& w = need_const(n, consts, 1, "Conv weight", DType::kFloat32);
  Geom g = conv_geom(n, in, w.shape());
  std::vector<float> bias;
  if (in.size() > 2 && !n.inputs[2].empty()) {
    const Tensor& b = need_const(n, consts, 2, "Conv bias", DType::kFloat32, g.M);
    bias.assign(b.data<float>(), b.data<float>() + b.numel());
  }
  Kernel k;
  k.outputs = {{spatial_out(in[0].shape, g.M, g), DType::kFloat32}};
  Tensor wt = w;
  const float lo = n.act_bounds().first, hi = n.act_bounds().second;
  auto acc = std::make_shared<std::vector<float>>(static_cast<size_t>(g.oH * g.oW));
  const std::vector<float> no_zero;
  k.run = [g, wt, bias, lo, hi, acc, no_zero](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    const int64_t plane = g.oH * g.oW;
    conv_loops<float, float, float>(g, i[0]->data<float>(), wt.data<float>(), 0.0f, no_zero, bias, *acc,
                                    [&](int64_t nb, int64_t m, const float* acc) {
                                      float* dst = y + (nb * g.M + m) * plane;
                                      for (int64_t p = 0; p < plane; ++p) dst[p] = std::min(std::max(acc[p], lo), hi);
                                    });
  };
  return k;
}

}  // namespace

bool window_attrs_ok(const std::vector<int64_t>& s, const std::vector<int64_t>& d, const std::vector<int64_t>& p,
                     int64_t kH, int64_t kW) {
  return s.size() == 2 && d.size() == 2 && p.size() == 4 && s[0] > 0 && s[1] > 0 && d[0] > 0 && d[1] > 0 && kH > 0 &&
         kW > 0 && *std::min_element(p.begin(), p.end()) >= 0;
}

std::vector<int32_t> int32_bias(const ir::Node& n, const Tensor& b, int64_t M, const std::vector<float>& in_w) {
  if (b.dtype() != DType::kInt32 && b.dtype() != DType::kFloat32)
    throw DataError(n.label() + ": the bias is " + std::string(dtype_name(b.dtype())) + ", expected int32 or float32");
  std::vector<int32_t> out(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m) {
    if (b.dtype() == DType::kInt32) {
      out[static_cast<size_t>(m)] = b.data<int32_t>()[m];
      continue;
    }
    const double v = std::nearbyint(static_cast<double>(b.data<float>()[m] / in_w[static_cast<size_t>(m)]));
    if (std::isnan(v)) continue;
    out[static_cast<size_t>(m)] = static_cast<int32_t>(std::clamp(v, -2147483648.0, 2147483647.0));
  }
  return out;
}

namespace {

std::vector<int32_t> int_bias(const Node& n, const Tensor* b, int64_t M, const std::vector<float>& mult_in_w) {
  if (!b) return std::vector<int32_t>(static_cast<size_t>(M), 0);
  if (b->numel() != M) bad_shape(n, "bias has " + std::to_string(b->numel()) + " values, expected " + std::to_string(M));
  return int32_bias(n, *b, M, mult_in_w);
}


// Writes codes for n accumulators of one output channel at y + base, as the output
// dtype (uint8 / int8 / int16): 32-bit accumulators through the target's
// accumulator (Requantizer::codes), 64-bit ones (16x8 layers) through codes_wide.
template <typename Acc>
void write_codes(const Requantizer& rq, DType yd, const Acc* a, int64_t n, size_t ch, int32_t zp, QRange r, void* y,
                 int64_t base) {
  auto go = [&](auto* out) {
    if constexpr (std::is_same_v<Acc, int64_t>) rq.codes_wide(a, n, 0, ch, zp, r.lo, r.hi, out + base);
    else rq.codes(a, n, 0, ch, zp, r.lo, r.hi, out + base);
  };
  if (yd == DType::kUInt8) go(static_cast<uint8_t*>(y));
  else if (yd == DType::kInt16) go(static_cast<int16_t*>(y));
  else go(static_cast<int8_t*>(y));
}

Kernel qconv(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Tensor& w = need_const(n, consts, 1, "QLinearConv weight", n.in_q.at(1).dtype);
  Geom g = conv_geom(n, in, w.shape());
  const ir::QInfo &xq = n.in_q.at(0), &wq = n.in_q.at(1), &yq = n.out_q;
  check_channels(n, xq, 1, "input qparams");
  check_channels(n, wq, g.M, "weight qparams");
  check_channels(n, yq, 1, "output qparams");
  std::vector<float> in_w;
  const std::vector<float> mult = accumulator_multipliers(n, g.M, &in_w);
  const Tensor* b = in.size() > 2 && !n.inputs[2].empty() ? &need_const(n, consts, 2, "QLinearConv bias") : nullptr;
  std::vector<int32_t> bias = int_bias(n, b, g.M, in_w);
  std::vector<int32_t> wz(static_cast<size_t>(g.M));
  for (int64_t m = 0; m < g.M; ++m) wz[static_cast<size_t>(m)] = per(wq.zero_point, m);
  Kernel k;
  k.outputs = {{spatial_out(in[0].shape, g.M, g), yq.dtype}};
  const QRange r = act_range(n);
  const int32_t zy = yq.zero_point[0], zx = xq.zero_point[0];
  Tensor wt = w;
  const DType xd = in[0].dtype, yd = yq.dtype;
  const bool wu8 = w.dtype() == DType::kUInt8;
  const size_t plane_n = static_cast<size_t>(g.oH * g.oW);
  auto acc = std::make_shared<std::vector<int32_t>>(xd == DType::kInt16 ? 0 : plane_n);
  // 16x8 (int16 input): 64-bit accumulators, as TFLite's 16x8 convolution.
  auto acc64 = std::make_shared<std::vector<int64_t>>(xd == DType::kInt16 ? plane_n : 0);
  const std::vector<int64_t> wz64(wz.begin(), wz.end()), bias64(bias.begin(), bias.end());
  const Requantizer rq = accumulator_requantizer(n, mult);
  k.run = [=](const In& i, const Out& o) {
    const int64_t plane = g.oH * g.oW;
    void* y = o[0]->raw();
    auto store = [&](int64_t nb, int64_t m, const auto* a) {
      write_codes(rq, yd, a, plane, static_cast<size_t>(m), zy, r, y, (nb * g.M + m) * plane);
    };
    auto go = [&](auto* x, auto* wp) {
      using TX = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
      using TW = std::remove_const_t<std::remove_pointer_t<decltype(wp)>>;
      if constexpr (std::is_same_v<TX, int16_t>) conv_loops<TX, TW, int64_t>(g, x, wp, zx, wz64, bias64, *acc64, store);
      else conv_loops<TX, TW, int32_t>(g, x, wp, zx, wz, bias, *acc, store);
    };
    auto with_x = [&](auto* wp) {
      if (xd == DType::kUInt8) go(i[0]->data<uint8_t>(), wp);
      else if (xd == DType::kInt16) go(i[0]->data<int16_t>(), wp);
      else go(i[0]->data<int8_t>(), wp);
    };
    if (wu8) with_x(wt.data<uint8_t>());
    else with_x(wt.data<int8_t>());
  };
  return k;
}

// --- ConvTranspose (float, 2-D) ------------------------------------------------------

Kernel conv_transpose(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  if (x.size() != 4) unsupported(n, "only 2-D ConvTranspose ([N, C, H, W]) is supported");
  if (n.has("output_shape")) unsupported(n, "the output_shape attribute is not supported (use pads)");
  const Tensor& w = need_const(n, consts, 1, "ConvTranspose weight", DType::kFloat32);
  const int64_t group = n.attr_i("group", 1);
  const Shape& ws = w.shape();
  if (ws.size() != 4 || ws[0] != x[1]) bad_shape(n, "weight " + shape_str(ws) + " does not match input " + shape_str(x));
  if (group < 1 || x[1] % group != 0)
    bad_shape(n, "group " + std::to_string(group) + " must be positive and divide the input channels " + std::to_string(x[1]));
  const int64_t C = x[1], M = ws[1] * group, kH = ws[2], kW = ws[3];
  auto s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0}),
       op = n.attr_ints("output_padding", {0, 0});
  // Lengths and signs before indexing them (the ONNX fuzzer found short lists read past).
  if (!window_attrs_ok(s, d, p, kH, kW) || op.size() != 2 || op[0] < 0 || op[1] < 0)
    bad_shape(n, "needs 2 positive strides and dilations, 4 non-negative pads, 2 non-negative output_padding values "
                 "and a positive kernel");
  if (n.attr_s("auto_pad", "NOTSET") != "NOTSET") unsupported(n, "auto_pad on ConvTranspose");
  const int64_t oH = (x[2] - 1) * s[0] - p[0] - p[2] + d[0] * (kH - 1) + op[0] + 1;
  const int64_t oW = (x[3] - 1) * s[1] - p[1] - p[3] + d[1] * (kW - 1) + op[1] + 1;
  std::vector<float> bias(static_cast<size_t>(M), 0.0f);
  if (in.size() > 2 && !n.inputs[2].empty()) {
    const Tensor& b = need_const(n, consts, 2, "ConvTranspose bias", DType::kFloat32, M);
    std::copy(b.data<float>(), b.data<float>() + M, bias.begin());
  }
  Kernel k;
  k.outputs = {{{x[0], M, oH, oW}, DType::kFloat32}};
  Tensor wt = w;
  const int64_t N = x[0], H = x[2], W = x[3];
  k.run = [=](const In& i, const Out& o) {
    const float* xp = i[0]->data<float>();
    const float* wp = wt.data<float>();
    float* y = o[0]->data<float>();
    const int64_t cg = C / group, mg = M / group;
    for (int64_t nb = 0; nb < N; ++nb)
      for (int64_t m = 0; m < M; ++m)
        std::fill(y + (nb * M + m) * oH * oW, y + (nb * M + m + 1) * oH * oW, bias[static_cast<size_t>(m)]);
    for (int64_t nb = 0; nb < N; ++nb)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t gi = c / cg;
        for (int64_t mm = 0; mm < mg; ++mm) {
          const int64_t m = gi * mg + mm;
          for (int64_t kh = 0; kh < kH; ++kh)
            for (int64_t kw = 0; kw < kW; ++kw) {
              const float wv = wp[((c * mg + mm) * kH + kh) * kW + kw];
              for (int64_t ih = 0; ih < H; ++ih) {
                const int64_t oh = ih * s[0] - p[0] + kh * d[0];
                if (oh < 0 || oh >= oH) continue;
                const float* xr = xp + ((nb * C + c) * H + ih) * W;
                float* yr = y + ((nb * M + m) * oH + oh) * oW;
                for (int64_t iw = 0; iw < W; ++iw) {
                  const int64_t ow = iw * s[1] - p[1] + kw * d[1];
                  if (ow >= 0 && ow < oW) yr[ow] += xr[iw] * wv;
                }
              }
            }
        }
      }
  };
  return k;
}

// --- Gemm / MatMul ----------------------------------------------------------------------

void matmul_f(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N, bool ta, bool tb) {
  std::fill(c, c + M * N, 0.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t kk = 0; kk < K; ++kk) {
      const float av = ta ? a[kk * M + i] : a[i * K + kk];
      if (av == 0.0f) continue;
      float* cr = c + i * N;
      if (tb)
        for (int64_t j = 0; j < N; ++j) cr[j] += av * b[j * K + kk];
      else {
        const float* br = b + kk * N;
        for (int64_t j = 0; j < N; ++j) cr[j] += av * br[j];
      }
    }
}

Kernel gemm(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const bool ta = n.attr_i("transA", 0) != 0, tb = n.attr_i("transB", 0) != 0;
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.size() != 2 || b.size() != 2) bad_shape(n, "Gemm needs 2-D inputs, got " + shape_str(a) + " and " + shape_str(b));
  const int64_t M = ta ? a[1] : a[0], K = ta ? a[0] : a[1], N = tb ? b[0] : b[1];
  if ((tb ? b[1] : b[0]) != K) bad_shape(n, "inner dimensions differ: " + shape_str(a) + " x " + shape_str(b));
  const float alpha = n.attr_f("alpha", 1.0f), beta = n.attr_f("beta", 1.0f);
  Shape cs;
  if (in.size() > 2 && !n.inputs[2].empty()) {
    cs = in[2].shape;
    broadcast(n, cs, {M, N});
  }
  Kernel k;
  k.outputs = {{{M, N}, DType::kFloat32}};
  const bool has_c = !cs.empty() || (in.size() > 2 && !n.inputs[2].empty());
  const float lo = n.act_bounds().first, hi = n.act_bounds().second;
  k.run = [=](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    matmul_f(i[0]->data<float>(), i[1]->data<float>(), y, M, K, N, ta, tb);
    if (alpha != 1.0f)
      for (int64_t p = 0; p < M * N; ++p) y[p] *= alpha;
    if (has_c) {
      const float* c = i[2]->data<float>();
      for_each_broadcast({M, N}, {M, N}, cs, [&](int64_t p, int64_t, int64_t r) { y[p] += beta * c[r]; });
    }
    if (lo != -INFINITY || hi != INFINITY)
      for (int64_t p = 0; p < M * N; ++p) y[p] = std::min(std::max(y[p], lo), hi);
  };
  return k;
}

Kernel matmul(const Node& n, const std::vector<Meta>& in) {
  Shape a = in[0].shape, b = in[1].shape;
  if (a.empty() || b.empty()) bad_shape(n, "MatMul of a scalar: " + shape_str(a) + " x " + shape_str(b));
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  const int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
  if (b[b.size() - 2] != K) bad_shape(n, "inner dimensions differ: " + shape_str(in[0].shape) + " x " + shape_str(in[1].shape));
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Shape batch = broadcast(n, ba, bb);
  Shape out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  Kernel k;
  k.outputs = {{out, DType::kFloat32}};
  k.run = [=](const In& i, const Out& o) {
    const float* x = i[0]->data<float>();
    const float* y = i[1]->data<float>();
    float* z = o[0]->data<float>();
    for_each_broadcast(batch, ba, bb, [&](int64_t p, int64_t q, int64_t r) {
      matmul_f(x + q * M * K, y + r * K * N, z + p * M * N, M, K, N, false, false);
    });
  };
  return k;
}

// QLinearMatMul of two quantized activations ([..., M, K] x [..., K, N], batch dims
// broadcast as MatMul): int32 sums of (a - za)(b - zb), requantized per tensor.
Kernel qmatmul_activations(const Node& n, const std::vector<Meta>& in) {
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.size() < 2 || b.size() < 2) unsupported(n, "int8 MatMul of activations needs rank 2 or more on both sides");
  const int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
  if (b[b.size() - 2] != K) bad_shape(n, "inner dimensions differ: " + shape_str(a) + " x " + shape_str(b));
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape batch = broadcast(n, ba, bb);
  const ir::QInfo &aq = n.in_q.at(0), &bq = n.in_q.at(1), &yq = n.out_q;
  check_channels(n, aq, 1, "input A qparams");
  check_channels(n, bq, 1, "input B qparams");
  check_channels(n, yq, 1, "output qparams");
  const std::vector<float> mult = accumulator_multipliers(n, 1, nullptr);
  Shape out = batch;
  out.push_back(M);
  out.push_back(N);
  Kernel k;
  k.outputs = {{out, yq.dtype}};
  const QRange r = act_range(n);
  const int32_t za = aq.zero_point[0], zb = bq.zero_point[0], zy = yq.zero_point[0];
  const DType yd = yq.dtype;
  const Requantizer rq = accumulator_requantizer(n, mult);
  k.run = [=](const In& i, const Out& o) {
    const Tensor &x = *i[0], &w = *i[1];
    for_each_broadcast(batch, ba, bb, [&](int64_t p, int64_t q, int64_t s) {
      for (int64_t row = 0; row < M; ++row)
        for (int64_t col = 0; col < N; ++col) {
          int64_t acc = 0;
          for (int64_t kk = 0; kk < K; ++kk)
            acc += int64_t{qload(x, (q * M + row) * K + kk) - za} * (qload(w, (s * K + kk) * N + col) - zb);
          store_code(yd, o[0]->raw(), (p * M + row) * N + col, rq.code(acc, 0, zy, r.lo, r.hi));
        }
    });
  };
  return k;
}

// QGemm / QLinearMatMul with a constant int8 B: int32 accumulation, per-column requantization.
Kernel qgemm(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  // A computed B, or a constant batch of matrices (rank > 2): the batched product.
  if (n.op == "QLinearMatMul" && (consts.size() < 2 || !consts[1] || consts[1]->shape().size() != 2)) return qmatmul_activations(n, in);
  const bool is_gemm = n.op == "QGemm";
  const bool tb = is_gemm && n.attr_i("transB", 0) != 0;
  if (is_gemm && (n.attr_i("transA", 0) != 0 || n.attr_f("alpha", 1.0f) != 1.0f || n.attr_f("beta", 1.0f) != 1.0f))
    unsupported(n, "int8 Gemm needs transA=0, alpha=1, beta=1");
  const Tensor& bw = need_const(n, consts, 1, "int8 Gemm/MatMul weight", n.in_q.at(1).dtype);
  const Shape& a = in[0].shape;
  const Shape& b = bw.shape();
  if (b.size() != 2 || a.empty()) bad_shape(n, "int8 Gemm/MatMul needs a 2-D constant weight");
  const int64_t K = tb ? b[1] : b[0], N = tb ? b[0] : b[1];
  if (a.back() != K) bad_shape(n, "inner dimensions differ: " + shape_str(a) + " x " + shape_str(b));
  if (K <= 0 || N <= 0) bad_shape(n, "empty weight " + shape_str(b));
  const int64_t M = numel(a) / K;
  const ir::QInfo &xq = n.in_q.at(0), &wq = n.in_q.at(1), &yq = n.out_q;
  check_channels(n, xq, 1, "input qparams");
  check_channels(n, wq, N, "weight qparams");
  check_channels(n, yq, 1, "output qparams");
  std::vector<float> in_w;
  const std::vector<float> mult = accumulator_multipliers(n, N, &in_w);
  const Tensor* bias_t = in.size() > 2 && !n.inputs[2].empty() ? &need_const(n, consts, 2, "int8 Gemm bias") : nullptr;
  std::vector<int32_t> bias = int_bias(n, bias_t, N, in_w);
  Shape out(a.begin(), a.end() - 1);
  out.push_back(N);
  Kernel k;
  k.outputs = {{out, yq.dtype}};
  const QRange r = act_range(n);
  const int32_t zx = xq.zero_point[0], zy = yq.zero_point[0];
  std::vector<int32_t> wz(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) wz[static_cast<size_t>(j)] = per(wq.zero_point, j);
  Tensor wt = bw;
  const DType yd = yq.dtype;
  // 16x8 (int16 input): the 64-bit accumulator of TFLite's 16x8 fully connected.
  const bool wide = in[0].dtype == DType::kInt16;
  auto acc_buf = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(N));
  const std::vector<double> exact = exact_accumulator_multipliers(n, static_cast<int64_t>(mult.size()));
  const Requantizer rq = Requantizer::accumulator(n.arithmetic, mult, n.label(), exact);
  // One rounding (Arithmetic::fully_connected_single_rounding): the 64-bit product
  // rounded half up once, as the 16x8 path rounds.
  const bool single = single_rounding_fully_connected(n);
  const Requantizer rq_once = single ? Requantizer(RequantMode::kFixedPoint, n.arithmetic.multiplier_bits, Rounding::kHalfUp, 32,
                                                   Overflow::kSaturate, mult, n.label(), exact)
                                     : rq;
  k.run = [=](const In& i, const Out& o) {
    const Tensor& x = *i[0];
    std::vector<int64_t>& acc = *acc_buf;
    for (int64_t row = 0; row < M; ++row) {
      std::copy(bias.begin(), bias.end(), acc.begin());
      for (int64_t kk = 0; kk < K; ++kk) {
        const int64_t xv = qload(x, row * K + kk) - zx;
        if (xv == 0) continue;
        for (int64_t j = 0; j < N; ++j)
          acc[static_cast<size_t>(j)] += xv * (qload(wt, tb ? j * K + kk : kk * N + j) - wz[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < N; ++j) {
        const size_t c = static_cast<size_t>(j);
        const int32_t v = wide     ? rq.code_wide(acc[c], c, zy, r.lo, r.hi)
                          : single ? rq_once.code_wide(static_cast<int32_t>(acc[c]), c, zy, r.lo, r.hi)
                                   : rq.code(acc[c], c, zy, r.lo, r.hi);
        store_code(yd, o[0]->raw(), row * N + j, v);
      }
    }
  };
  return k;
}


}  // namespace

void register_reference_conv_gemm() {
  add_reference({"Conv"}, conv);
  add_reference({"QLinearConv"}, qconv);
  add_reference({"ConvTranspose"}, conv_transpose);
  add_reference({"Gemm"}, gemm);
  add_reference({"MatMul"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return matmul(n, in); });
  add_reference({"QGemm", "QLinearMatMul"}, qgemm);
}

}  // namespace qfx::runtime
