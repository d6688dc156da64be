// Fast elementwise kernels of the onednn backend (plain loops the compiler
// vectorises, split over threads with OpenMP). Each computes exactly what the
// reference kernel computes, in the same float operations, so outputs are equal
// bit for bit; they only cover the common cases (per-tensor qparams, equal shapes).
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../kernels.h"
#include "../reference/common.h"

namespace qfx::runtime {
namespace {

using In = std::vector<const Tensor*>;
using Out = std::vector<Tensor*>;
constexpr int64_t kParallelMin = 1 << 15;  // elements below which one thread is faster

template <typename T>
void quantize_loop(const float* x, T* y, int64_t n, float scale, int32_t zp, int32_t lo, int32_t hi) {
  const float fz = static_cast<float>(zp), flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  const float magic = 12582912.0f;
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t p = 0; p < n; ++p) {  // one select per statement: what GCC vectorises
    float t = x[p] / scale;
    t = t == t ? t : 0.0f;
    t = t < -4194304.0f ? -4194304.0f : t;
    t = t > 4194304.0f ? 4194304.0f : t;
    t = (t + magic) - magic;  // half to even
    t += fz;
    t = t < flo ? flo : t;
    t = t > fhi ? fhi : t;
    y[p] = static_cast<T>(static_cast<int32_t>(t));
  }
}

bool per_tensor_q(const Tensor* s, const Tensor* z) {
  return s && s->numel() == 1 && s->dtype() == DType::kFloat32 && (!z || z->numel() == 1);
}

int32_t int_at(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kUInt8: return t.data<uint8_t>()[0];
    case DType::kInt8: return t.data<int8_t>()[0];
    case DType::kInt32: return t.data<int32_t>()[0];
    default: return 0;
  }
}

// QuantizeLinear, per-tensor.
bool quantize(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const auto& consts = r.consts;
  if (n.attr_i("block_size", 0) != 0 || n.attr_i("output_dtype", 0) != 0)
    return r.decline("blocked, or typed by output_dtype (the reference kernel runs it)");
  if (in[0].dtype != DType::kFloat32 || consts.size() < 2 || !per_tensor_q(consts[1], consts.size() > 2 ? consts[2] : nullptr))
    return r.decline("needs float32 input and per-tensor constant qparams");
  const float scale = consts[1]->data<float>()[0];
  const bool has_z = consts.size() > 2 && consts[2];
  const DType dt = has_z ? consts[2]->dtype() : DType::kUInt8;
  if (dt != DType::kUInt8 && dt != DType::kInt8) return r.decline("output is not 8-bit");
  const int32_t zp = has_z ? int_at(*consts[2]) : 0;
  const int32_t lo = dt == DType::kUInt8 ? 0 : -128, hi = dt == DType::kUInt8 ? 255 : 127;
  k->outputs = {{in[0].shape, dt}};
  k->run = [=](const In& i, const Out& o) {
    const int64_t t = i[0]->numel();
    if (dt == DType::kUInt8) quantize_loop(i[0]->data<float>(), o[0]->data<uint8_t>(), t, scale, zp, lo, hi);
    else quantize_loop(i[0]->data<float>(), o[0]->data<int8_t>(), t, scale, zp, lo, hi);
  };
  return true;
}

// QRelu / QClip: a 256-entry table built with the reference arithmetic.
bool qunary(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const bool nhwc_out = r.nhwc_out;
  const DType xd = in[0].dtype, yd = n.out_q.dtype;
  if (n.arithmetic.elementwise != RequantMode::kFloat) return r.decline("a target's elementwise arithmetic (the reference simulates it)");
  if ((xd != DType::kUInt8 && xd != DType::kInt8) || n.in_q.empty() || n.in_q[0].scale.size() != 1 ||
      n.out_q.scale.size() != 1)
    return r.decline("needs 8-bit input and per-tensor qparams");
  // The reference kernel's exact arithmetic, run once on all 256 codes.
  Kernel ref = make_kernel(n, {{{256}, xd}}, {}, "reference");
  Tensor codes({256}, xd), table({256}, yd);
  for (int v = 0; v < 256; ++v) {
    if (xd == DType::kUInt8) codes.data<uint8_t>()[v] = static_cast<uint8_t>(v);
    else codes.data<int8_t>()[v] = static_cast<int8_t>(v - 128);
  }
  ref.run({&codes}, {&table});
  std::vector<uint8_t> lut(256);
  std::memcpy(lut.data(), table.raw(), 256);
  const int offset = xd == DType::kUInt8 ? 0 : 128;
  // Elementwise: any layout; the output keeps the input's when the consumers take it.
  k->accepts_nhwc = nhwc_out;
  k->outputs = {{in[0].shape, yd, in[0].nhwc && nhwc_out}};
  k->run = [lut, offset](const In& i, const Out& o) {
    const uint8_t* x = static_cast<const uint8_t*>(i[0]->raw());
    uint8_t* y = static_cast<uint8_t*>(o[0]->raw());
    const int64_t t = i[0]->numel();
    const uint8_t* l = lut.data();
#pragma omp parallel for if (t > kParallelMin)
    for (int64_t p = 0; p < t; ++p) y[p] = l[static_cast<uint8_t>(x[p] + offset)];
  };
  return true;
}

// u8 (+|x) u8 -> u8: one loop body, compiled for AVX-512, AVX2 and baseline x86-64
// and chosen at run time (simd_isa()). The file is compiled with -ffp-contract=off,
// so every variant does the reference's float operations one by one (no fused
// multiply-add) and rounds the same. Inputs are integers, so no NaN can arise.
template <bool Mul>
__attribute__((always_inline)) inline void qbinary_u8_body(const uint8_t* a, const uint8_t* b, uint8_t* y, int64_t n,
                                                           float sa, float za, float sb, float zb, float sy, float zy,
                                                           float lo, float hi) {
  const float magic = 12582912.0f;
#pragma omp simd
  for (int64_t p = 0; p < n; ++p) {
    const float ra = sa * (static_cast<float>(a[p]) - za);
    const float rb = sb * (static_cast<float>(b[p]) - zb);
    float t = (Mul ? ra * rb : ra + rb) / sy;
    t = t < -4194304.0f ? -4194304.0f : t;
    t = t > 4194304.0f ? 4194304.0f : t;
    t = (t + magic) - magic;  // half to even (|t| <= 2^22)
    t += zy;
    t = t < lo ? lo : t;
    t = t > hi ? hi : t;
    y[p] = static_cast<uint8_t>(static_cast<int32_t>(t));
  }
}

using QBinaryChunk = void (*)(const uint8_t*, const uint8_t*, uint8_t*, int64_t, float, float, float, float, float, float,
                              float, float);

#define QFX_QBINARY_VARIANT(NAME, TARGET)                                                                              \
  template <bool Mul>                                                                                                   \
  TARGET void NAME(const uint8_t* a, const uint8_t* b, uint8_t* y, int64_t n, float sa, float za, float sb, float zb,  \
                   float sy, float zy, float lo, float hi) {                                                            \
    qbinary_u8_body<Mul>(a, b, y, n, sa, za, sb, zb, sy, zy, lo, hi);                                                   \
  }
QFX_QBINARY_VARIANT(qbinary_chunk_avx512, __attribute__((target("avx512f"))))
QFX_QBINARY_VARIANT(qbinary_chunk_avx2, __attribute__((target("avx2"))))
QFX_QBINARY_VARIANT(qbinary_chunk_baseline, )
#undef QFX_QBINARY_VARIANT

template <bool Mul>
QBinaryChunk qbinary_chunk(const std::string& isa) {
  if (isa == "avx512") return qbinary_chunk_avx512<Mul>;
  if (isa == "avx2") return qbinary_chunk_avx2<Mul>;
  return qbinary_chunk_baseline<Mul>;
}

// Splits the elements over the threads; each runs the CPU-specific chunk kernel
// (an OpenMP region's body would not inherit target_clones).
void qbinary_u8(QBinaryChunk chunk, const uint8_t* a, const uint8_t* b, uint8_t* y, int64_t n, float sa, float za,
                float sb, float zb, float sy, float zy, float lo, float hi) {
#pragma omp parallel if (n > kParallelMin)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t b0 = n * t / nt, b1 = n * (t + 1) / nt;
    chunk(a + b0, b + b0, y + b0, b1 - b0, sa, za, sb, zb, sy, zy, lo, hi);
  }
}

// QLinearAdd / QLinearMul of two tensors of the same shape, or of a 4-D tensor and a
// per-channel gate [N, C, 1, 1] (squeeze-excitation), per-tensor qparams. Both ops
// commute exactly in float, so the gate may be either input.
bool qbinary(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const bool nhwc_out = r.nhwc_out;
  if (n.arithmetic.elementwise != RequantMode::kFloat) return r.decline("a target's elementwise arithmetic (the reference simulates it)");
  if (in.size() != 2 || n.in_q.size() < 2) return r.decline("needs two inputs with qparams");
  auto is_gate = [](const Meta& g, const Meta& x) {
    return x.shape.size() == 4 && g.shape.size() == 4 && g.shape[0] == x.shape[0] && g.shape[1] == x.shape[1] &&
           g.shape[2] == 1 && g.shape[3] == 1 && (x.shape[2] != 1 || x.shape[3] != 1);
  };
  const bool same = in[0].shape == in[1].shape;
  const size_t xi = !same && is_gate(in[0], in[1]) ? 1 : 0, gi = 1 - xi;  // the full tensor and the gate
  if (!same && !is_gate(in[gi], in[xi])) return r.decline("broadcasting other than a per-channel [N, C, 1, 1] gate");
  for (const auto& m : in)
    if (m.dtype != DType::kUInt8) return r.decline("s8 inputs (u8 only)");
  if (n.out_q.dtype != DType::kUInt8 || n.in_q[0].scale.size() != 1 || n.in_q[1].scale.size() != 1) return r.decline("s8 output or per-channel qparams");
  // The reference computes (qa - za) as int32 then converts: identical to converting
  // each (exact for 8-bit values) and subtracting in float.
  const float sa = n.in_q[xi].scale[0], sb = n.in_q[gi].scale[0], sy = n.out_q.scale[0];
  const float za = static_cast<float>(n.in_q[xi].zero_point[0]), zb = static_cast<float>(n.in_q[gi].zero_point[0]);
  const float zy = static_cast<float>(n.out_q.zero_point[0]);
  // Output clamp, fused activation included.
  const bool mul = n.op == "QLinearMul";
  const ref::QRange act = ref::act_range(n);
  const int32_t lo = act.lo, hi = act.hi;
  // The output keeps the full input's layout (when the consumers take it); a gate is
  // the same bytes in either layout.
  k->accepts_nhwc = nhwc_out && (same ? in[0].nhwc == in[1].nhwc : true);
  const bool nhwc = k->accepts_nhwc && in[xi].nhwc;
  k->outputs = {{in[xi].shape, DType::kUInt8, nhwc}};
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  const std::string isa = simd_isa();
  const QBinaryChunk chunk = mul ? qbinary_chunk<true>(isa) : qbinary_chunk<false>(isa);
  if (same) {
    k->run = [=](const In& i, const Out& o) {
      qbinary_u8(chunk, i[0]->data<uint8_t>(), i[1]->data<uint8_t>(), o[0]->data<uint8_t>(), i[0]->numel(), sa, za, sb,
                 zb, sy, zy, flo, fhi);
    };
    return true;
  }
  const int64_t N = in[xi].shape[0], C = in[xi].shape[1], HW = in[xi].shape[2] * in[xi].shape[3];
  k->run = [=](const In& i, const Out& o) {
    const uint8_t* x = i[xi]->data<uint8_t>();
    const uint8_t* g = i[gi]->data<uint8_t>();
    uint8_t* y = o[0]->data<uint8_t>();
    if (nhwc) {  // rows of C channels: the gate's row for the image is the second operand
#pragma omp parallel for if (N * HW * C > kParallelMin)
      for (int64_t row = 0; row < N * HW; ++row)
        chunk(x + row * C, g + (row / HW) * C, y + row * C, C, sa, za, sb, zb, sy, zy, flo, fhi);
    } else {  // planes of HW pixels: the gate's value repeated
#pragma omp parallel if (N * HW * C > kParallelMin)
      {
        std::vector<uint8_t> rep(static_cast<size_t>(HW));
#pragma omp for
        for (int64_t plane = 0; plane < N * C; ++plane) {
          std::memset(rep.data(), g[plane], rep.size());
          chunk(x + plane * HW, rep.data(), y + plane * HW, HW, sa, za, sb, zb, sy, zy, flo, fhi);
        }
      }
    }
  };
  return true;
}

template <typename F>
void map_loop(const float* x, float* y, int64_t n, F f) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t p = 0; p < n; ++p) y[p] = f(x[p]);
}

// Relu / Clip in float.
bool float_unary(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const auto& consts = r.consts;
  const bool nhwc_out = r.nhwc_out;
  if (!n.fused_act.empty()) return r.decline("a fused activation");
  if (in[0].dtype != DType::kFloat32) return r.decline("input is not float32");
  float lo = 0.0f, hi = std::numeric_limits<float>::infinity();
  if (n.op == "Clip") {
    lo = -std::numeric_limits<float>::infinity();
    auto bound = [&](size_t j, float* v) {
      if (j >= n.inputs.size() || n.inputs[j].empty()) return true;
      if (j >= consts.size() || !consts[j] || consts[j]->dtype() != DType::kFloat32 || consts[j]->numel() != 1) return false;
      *v = consts[j]->data<float>()[0];
      return true;
    };
    if (!bound(1, &lo) || !bound(2, &hi)) return r.decline("Clip bounds are not float32 constants");
  }
  k->accepts_nhwc = nhwc_out;
  k->outputs = {{in[0].shape, DType::kFloat32, in[0].nhwc && nhwc_out}};
  if (n.op == "Relu") {
    k->run = [](const In& i, const Out& o) {
      map_loop(i[0]->data<float>(), o[0]->data<float>(), i[0]->numel(), [](float x) { return x > 0 ? x : 0.0f; });
    };
  } else {
    k->run = [lo, hi](const In& i, const Out& o) {
      map_loop(i[0]->data<float>(), o[0]->data<float>(), i[0]->numel(), [lo, hi](float x) { return std::min(std::max(x, lo), hi); });
    };
  }
  return true;
}

bool row_add(const KernelRequest& r, Kernel* k);

// b broadcast along a's last dim: b is [C] or [1, ..., 1, C] with C a's last dim
// (a bias after a MatMul, a LayerNorm's scale and shift).
bool last_dim_broadcast(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty() || b.size() > a.size() || b.back() != a.back()) return false;
  for (size_t d = 0; d + 1 < b.size(); ++d)
    if (b[d] != 1) return false;
  return true;
}

// Float Add of two same-shape tensors, or of a row vector broadcast along the last
// dim, with a fused Relu / Clip: y = act(a + b).
bool float_add(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const auto& in = r.in;
  const bool nhwc_out = r.nhwc_out;
  if (in.size() == 2 && in[0].dtype == DType::kFloat32 && in[1].dtype == DType::kFloat32 && in[0].shape != in[1].shape &&
      !in[0].nhwc && !in[1].nhwc && (last_dim_broadcast(in[0].shape, in[1].shape) || last_dim_broadcast(in[1].shape, in[0].shape)))
    return row_add(r, k);
  if (in.size() != 2 || in[0].dtype != DType::kFloat32 || in[1].dtype != DType::kFloat32 || in[0].shape != in[1].shape)
    return r.decline("needs two float32 inputs of the same shape, or a row broadcast along the last dim");
  const float lo = n.act_bounds().first, hi = n.act_bounds().second;
  k->accepts_nhwc = nhwc_out && in[0].nhwc == in[1].nhwc;
  k->outputs = {{in[0].shape, DType::kFloat32, k->accepts_nhwc && in[0].nhwc}};
  k->run = [lo, hi](const In& i, const Out& o) {
    const float* a = i[0]->data<float>();
    const float* b = i[1]->data<float>();
    float* y = o[0]->data<float>();
    const int64_t t = i[0]->numel();
#pragma omp parallel for simd if (t > kParallelMin)
    for (int64_t p = 0; p < t; ++p) y[p] = std::min(std::max(a[p] + b[p], lo), hi);
  };
  return true;
}

// y = act(x + row) with `row` broadcast along x's last dim (either input may be the row).
bool row_add(const KernelRequest& r, Kernel* k) {
  const ir::Node& n = r.node;
  const bool first_is_row = r.in[0].shape.size() < r.in[1].shape.size() ||
                            (r.in[0].shape.size() == r.in[1].shape.size() && last_dim_broadcast(r.in[1].shape, r.in[0].shape));
  const size_t xi = first_is_row ? 1 : 0;
  const float lo = n.act_bounds().first, hi = n.act_bounds().second;
  k->outputs = {{r.in[xi].shape, DType::kFloat32}};
  k->run = [lo, hi, xi](const In& i, const Out& o) {
    const float* x = i[xi]->data<float>();
    const float* row = i[1 - xi]->data<float>();
    float* y = o[0]->data<float>();
    const int64_t C = i[1 - xi]->numel(), rows = i[xi]->numel() / std::max<int64_t>(C, 1);
#pragma omp parallel for if (rows * C > kParallelMin)
    for (int64_t q = 0; q < rows; ++q)
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) y[q * C + c] = std::min(std::max(x[q * C + c] + row[c], lo), hi);
  };
  return true;
}

}  // namespace

std::string simd_isa() {
  const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
  const std::string best = avx512 ? "avx512" : avx2 ? "avx2" : "baseline";
  const char* env = std::getenv("QFX_SIMD_ISA");
  if (!env || !*env) return best;
  const std::string want = env;
  if (want == "baseline") return want;
  if (want == "avx2") return avx2 ? want : best;
  if (want == "avx512") return best;
  return best;  // unknown names: the best this CPU has
}

void nhwc_to_nchw(const void* src, void* dst, const Shape& shape, size_t elem) {
  const int64_t N = shape[0], C = shape[1], HW = shape[2] * shape[3];
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
#pragma omp parallel for collapse(2) if (N * C * HW > kParallelMin)
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const uint8_t* from = s + (b * HW * C + c) * static_cast<int64_t>(elem);
      uint8_t* to = d + (b * C + c) * HW * static_cast<int64_t>(elem);
      if (elem == 1) {
        for (int64_t p = 0; p < HW; ++p) to[p] = from[p * C];
      } else {
        for (int64_t p = 0; p < HW; ++p) std::memcpy(to + p * static_cast<int64_t>(elem), from + p * C * static_cast<int64_t>(elem), elem);
      }
    }
}

void nchw_to_nhwc(const void* src, void* dst, const Shape& shape, size_t elem) {
  const int64_t N = shape[0], C = shape[1], HW = shape[2] * shape[3];
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const auto e = static_cast<int64_t>(elem);
#pragma omp parallel for collapse(2) if (N * C * HW > kParallelMin)
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const uint8_t* from = s + (b * C + c) * HW * e;
      uint8_t* to = d + (b * HW * C + c) * e;
      for (int64_t p = 0; p < HW; ++p) std::memcpy(to + p * C * e, from + p * e, elem);
    }
}

void register_simd_kernels() {
  add_kernel("onednn", "QuantizeLinear", "simd", quantize);
  const bool nhwc = true;  // elementwise: either layout
  for (const char* op : {"QRelu", "QClip"}) add_kernel("onednn", op, "simd", qunary, nhwc);
  for (const char* op : {"QLinearAdd", "QLinearMul"}) add_kernel("onednn", op, "simd", qbinary, nhwc);
  add_kernel("onednn", "Add", "simd", float_add, nhwc);
  for (const char* op : {"Relu", "Clip"}) add_kernel("onednn", op, "simd", float_unary, nhwc);
}

}  // namespace qfx::runtime
