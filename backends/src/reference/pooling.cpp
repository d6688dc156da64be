// Reference kernels: MaxPool, AveragePool, GlobalAveragePool (float and int8), ReduceMean, ReduceSum.
#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

// --- pooling ----------------------------------------------------------------------------------

template <typename T>
void max_pool_loops(const Geom& g, const T* x, T* y) {
  for (int64_t p = 0; p < g.N * g.C; ++p) {
    const T* xp = x + p * g.H * g.W;
    T* yp = y + p * g.oH * g.oW;
    for (int64_t oh = 0; oh < g.oH; ++oh)
      for (int64_t ow = 0; ow < g.oW; ++ow) {
        T best = std::numeric_limits<T>::lowest();
        for (int64_t kh = 0; kh < g.kH; ++kh) {
          const int64_t ih = oh * g.sH + kh * g.dH - g.pT;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t kw = 0; kw < g.kW; ++kw) {
            const int64_t iw = ow * g.sW + kw * g.dW - g.pL;
            if (iw >= 0 && iw < g.W) best = std::max(best, xp[ih * g.W + iw]);
          }
        }
        yp[oh * g.oW + ow] = best;
      }
  }
}

// Average-pool windows: for each output position j, the sum of `load(input index)`
// over the window's in-bounds positions and the divisor (positions inside the
// padded input with count_include_pad, in-bounds positions otherwise).
template <typename T, typename Load, typename Emit>
void avg_pool_windows(const Geom& g, bool include_pad, Load&& load, Emit&& emit) {
  for (int64_t p = 0; p < g.N * g.C; ++p)
    for (int64_t oh = 0; oh < g.oH; ++oh)
      for (int64_t ow = 0; ow < g.oW; ++ow) {
        T sum = 0;
        int64_t cnt = 0, cnt_pad = 0;
        for (int64_t kh = 0; kh < g.kH; ++kh) {
          const int64_t ih = oh * g.sH + kh * g.dH - g.pT;
          for (int64_t kw = 0; kw < g.kW; ++kw) {
            const int64_t iw = ow * g.sW + kw * g.dW - g.pL;
            if (ih < g.H + g.pB && iw < g.W + g.pR) ++cnt_pad;
            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
            sum += load((p * g.H + ih) * g.W + iw);
            ++cnt;
          }
        }
        emit((p * g.oH + oh) * g.oW + ow, sum, include_pad ? cnt_pad : std::max<int64_t>(cnt, 1));
      }
}

Kernel pool(const Node& n, const std::vector<Meta>& in) {
  if (n.attr_i("storage_order", 0) != 0) unsupported(n, "storage_order=1");
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) unsupported(n, "the Indices output");
  Geom g = window_geom(n, in[0].shape, n.attr_ints("kernel_shape"), n.attr_i("ceil_mode", 0) != 0);
  Kernel k;
  const DType dt = in[0].dtype;
  k.outputs = {{spatial_out(in[0].shape, g.C, g), dt}};
  if (n.op == "MaxPool") {
    k.run = [g, dt](const In& i, const Out& o) {
      if (dt == DType::kFloat32) max_pool_loops(g, i[0]->data<float>(), o[0]->data<float>());
      else if (dt == DType::kUInt8) max_pool_loops(g, i[0]->data<uint8_t>(), o[0]->data<uint8_t>());
      else max_pool_loops(g, i[0]->data<int8_t>(), o[0]->data<int8_t>());
    };
    return k;
  }
  const bool include_pad = n.attr_i("count_include_pad", 0) != 0;
  if (n.op == "QLinearAveragePool") {
    // int8: the real mean sx * (sum - count * zx) / count, quantized with the output's qparams.
    const float sx = n.in_q.at(0).scale[0], sy = n.out_q.scale[0];
    const int32_t zx = n.in_q.at(0).zero_point[0], zy = n.out_q.zero_point[0];
    const QRange r = qrange(n.out_q.dtype);
    const DType yd = n.out_q.dtype;
    k.outputs = {{spatial_out(in[0].shape, g.C, g), n.out_q.dtype}};
    // A target arithmetic rescales with one multiplier per window size (count).
    const bool onnx = n.arithmetic.elementwise == RequantMode::kFloat && n.arithmetic.accumulator_bits == 32;
    if (!onnx && g.kH * g.kW > (int64_t{1} << 20)) unsupported(n, "a pooling window over 2^20 elements with a target arithmetic");
    std::vector<float> mult(onnx ? 1 : static_cast<size_t>(g.kH * g.kW + 1));
    for (size_t c = 0; c < mult.size(); ++c) mult[c] = sx / (sy * static_cast<float>(c == 0 ? 1 : c));
    const Requantizer rq = Requantizer::pooling(n.arithmetic, mult, n.label());
    const bool divide = divides_average_pool(n);
    k.run = [=](const In& i, const Out& o) {
      avg_pool_windows<int32_t>(g, include_pad, [&](int64_t j) { return qload(*i[0], j) - zx; },
                                [&](int64_t j, int32_t sum, int64_t count) {
                                  const int32_t v =
                                      divide ? std::clamp(pool_divide(int64_t{sum} + count * zx, count), r.lo, r.hi)
                                      : onnx ? requantize(sum, sx / (sy * static_cast<float>(count)), zy, r.lo, r.hi)
                                             : rq.code(sum, static_cast<size_t>(count), zy, r.lo, r.hi);
                                  store_code(yd, o[0]->raw(), j, v);
                                });
    };
    return k;
  }
  if (dt != DType::kFloat32) unsupported(n, "AveragePool needs float32 input");
  k.run = [g, include_pad](const In& i, const Out& o) {
    const float* x = i[0]->data<float>();
    float* y = o[0]->data<float>();
    avg_pool_windows<float>(g, include_pad, [x](int64_t j) { return x[j]; },
                            [y](int64_t j, float sum, int64_t count) { y[j] = sum / static_cast<float>(count); });
  };
  return k;
}

Kernel global_avg_pool(const Node& n, const std::vector<Meta>& in) {
  const Shape& x = in[0].shape;
  if (x.size() < 3) bad_shape(n, "needs [N, C, spatial...], got " + shape_str(x));
  Shape out = {x[0], x[1]};
  for (size_t i = 2; i < x.size(); ++i) out.push_back(1);
  const int64_t planes = x[0] * x[1], hw = inner_numel(x, 2);
  Kernel k;
  const bool q = n.op == "QLinearGlobalAveragePool";
  k.outputs = {{out, q ? n.out_q.dtype : DType::kFloat32}};
  if (!q) {
    k.run = [planes, hw](const In& i, const Out& o) {
      const float* xp = i[0]->data<float>();
      float* y = o[0]->data<float>();
      for (int64_t p = 0; p < planes; ++p) {
        float s = 0;
        for (int64_t j = 0; j < hw; ++j) s += xp[p * hw + j];
        y[p] = s / static_cast<float>(hw);
      }
    };
    return k;
  }
  // int8: real mean = sx * (sum - hw * zx) / hw, quantized with the output's qparams.
  const float sx = n.in_q.at(0).scale[0], sy = n.out_q.scale[0];
  const int32_t zx = n.in_q.at(0).zero_point[0], zy = n.out_q.zero_point[0];
  const QRange r = qrange(n.out_q.dtype);
  const DType yd = n.out_q.dtype;
  const Requantizer rq = Requantizer::pooling(n.arithmetic, {sx / (sy * static_cast<float>(hw))}, n.label());
  const bool divide = divides_average_pool(n);
  k.run = [=](const In& i, const Out& o) {
    for (int64_t p = 0; p < planes; ++p) {
      int64_t s = 0;
      for (int64_t j = 0; j < hw; ++j) s += qload(*i[0], p * hw + j);
      const int32_t acc = static_cast<int32_t>(s - hw * zx);
      const int32_t v = divide ? std::clamp(pool_divide(s, hw), r.lo, r.hi) : rq.code(acc, 0, zy, r.lo, r.hi);
      store_code(yd, o[0]->raw(), p, v);
    }
  };
  return k;
}

// ReduceMean / ReduceSum over `axes` (attribute, or input 1 from ReduceSum-13 and
// ReduceMean-18; none: every axis unless noop_with_empty_axes).
Kernel reduce_mean(const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>& consts) {
  const Shape& x = in[0].shape;
  check_dtype(n, in[0].dtype, {DType::kFloat32});
  const Reduction rd = reduction(n, x, consts);
  const bool sum = n.op == "ReduceSum";
  const Shape out = rd.out, kept = rd.kept;
  Kernel k;
  k.outputs = {{out, DType::kFloat32}};
  const int64_t count = numel(kept) > 0 ? numel(x) / numel(kept) : 0;  // an empty input: nothing to divide
  k.run = [=](const In& i, const Out& o) {
    float* y = o[0]->data<float>();
    std::fill(y, y + numel(kept), 0.0f);
    for_each_broadcast(x, x, kept, [&](int64_t p, int64_t, int64_t r) { y[r] += i[0]->data<float>()[p]; });
    if (!sum)
      for (int64_t p = 0; p < numel(kept); ++p) y[p] /= static_cast<float>(count);
  };
  return k;
}


}  // namespace

void register_reference_pooling() {
  add_reference({"MaxPool", "AveragePool", "QLinearAveragePool"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return pool(n, in); });
  add_reference({"GlobalAveragePool", "QLinearGlobalAveragePool"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return global_avg_pool(n, in); });
  add_reference({"ReduceMean", "ReduceSum"}, reduce_mean);
}

}  // namespace qfx::runtime
