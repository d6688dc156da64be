// The int8 ops of the QDQ-matched runtime graph as TFLite builtins. Each converter
// checks what TFLite's int8 kernel needs of its qparams and names the node when a
// model asks for something else.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <type_traits>

#include <flatbuffers/flatbuffers.h>

#include "../kernels.h"
#include "qfx/error.h"
#include "qfx_tflite_schema.h"
#include "writer.h"

namespace qfx::runtime::tflite {

namespace s = qfx::tflite_schema;
namespace fb = flatbuffers;

#define QFX_TFL_SCALAR(fbb, T, field, value) \
  (fbb).AddElement<s::T::t##field>(s::T::k##field, static_cast<s::T::t##field>(value), s::T::t##field{})

namespace {

using Shape = std::vector<int64_t>;

std::string i32_bytes(const std::vector<int32_t>& v) {
  std::string out(v.size() * 4, '\0');
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

bool same_q(const ir::QInfo& a, const ir::QInfo& b) { return a.scale == b.scale && a.zero_point == b.zero_point; }

// Spatial padding of a 2-D window op: SAME (TFLite's: pad_total split with the
// smaller half first), VALID, or explicit pads [top, left, bottom, right] otherwise.
struct Padding {
  int64_t mode = s::Padding::VALID;
  std::vector<int64_t> pads;  ///< non-empty: neither SAME nor VALID
};

Padding padding(const ir::Node& n, const Shape& x, const std::vector<int64_t>& k, const std::vector<int64_t>& st,
                const std::vector<int64_t>& dil) {
  std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  const std::string autopad = n.attr_s("auto_pad", "NOTSET");
  if (autopad == "SAME_UPPER") return {s::Padding::SAME, {}};
  if (autopad == "VALID" || std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
    return {s::Padding::VALID, {}};
  if (autopad != "NOTSET") throw UnsupportedOpError(n.label() + ": auto_pad " + autopad + " has no TFLite form");
  bool same = true;
  for (size_t d = 0; d < 2; ++d) {
    const int64_t in = x[2 + d], out = (in + st[d] - 1) / st[d];
    const int64_t total = std::max<int64_t>((out - 1) * st[d] + (k[d] - 1) * dil[d] + 1 - in, 0);
    same = same && pads[d] == total / 2 && pads[d + 2] == total - total / 2;
  }
  if (same) return {s::Padding::SAME, {}};
  return {s::Padding::VALID, pads};
}

// Output size of a window op along spatial dim d (floor mode).
int64_t window_out(const Shape& x, size_t d, int64_t k, int64_t st, int64_t dil, const std::vector<int64_t>& pads) {
  return (x[2 + d] + pads[d] + pads[d + 2] - ((k - 1) * dil + 1)) / st + 1;
}

// A PAD of explicit pads [top, left, bottom, right] on NHWC `x` (int8: pads with the
// zero point), or with `lowest` a PADV2 padding with code -128, which no max-pooling
// window that also holds a value picks.
Value pad(Writer& w, const ir::Node& n, const Value& x, const std::vector<int64_t>& p, bool lowest = false) {
  const std::vector<int32_t> pads{0, 0, static_cast<int32_t>(p[0]), static_cast<int32_t>(p[2]),
                                  static_cast<int32_t>(p[1]), static_cast<int32_t>(p[3]), 0, 0};
  const int32_t pt = w.constant(n.name + "/paddings", {4, 2}, s::TensorType::INT32, i32_bytes(pads));
  Shape sh = x.shape;
  sh[2] += p[0] + p[2];
  sh[3] += p[1] + p[3];
  const Value y = w.out(n.name + "/padded", sh, true, s::TensorType::INT8, &x.q);
  if (!lowest) {
    w.op(s::BuiltinOperator::PAD, "PAD", {x.tensor, pt}, {y.tensor});
    return y;
  }
  const int32_t low = w.constant(n.name + "/pad_value", {1}, s::TensorType::INT8, std::string(1, static_cast<char>(-128)),
                                 x.q.scale, {x.q.zero_point[0]});
  w.op(s::BuiltinOperator::PADV2, "PADV2", {x.tensor, pt, low}, {y.tensor});
  return y;
}

// Weights of conv / gemm: int8, symmetric (zero points 0).
void check_weights(const ir::Node& n, const Tensor& wt, const ir::QInfo& wq) {
  if (wt.dtype() != DType::kInt8) throw DataError(n.label() + ": weights are " + dtype_name(wt.dtype()) + "; TFLite takes int8");
  for (int32_t z : wq.zero_point)
    if (z != 0) throw DataError(n.label() + ": weights have zero point " + std::to_string(z) + "; TFLite's int8 weights are symmetric");
}

// The int32 bias of conv / gemm `n` with M outputs (scales input x weight scale).
int32_t bias_tensor(Writer& w, const ir::Node& n, int64_t M) {
  std::vector<float> in_w;
  accumulator_multipliers(n, M, &in_w);
  std::vector<int32_t> b(static_cast<size_t>(M), 0);
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) b = int32_bias(n, w.g.initializers.at(n.inputs[2]), M, in_w);
  const size_t channels = n.in_q[1].scale.size();
  in_w.resize(channels);
  return w.constant(n.name + "/bias", {static_cast<int32_t>(M)}, s::TensorType::INT32, i32_bytes(b), in_w,
                    std::vector<int64_t>(channels, 0), 0);
}

const Tensor& weight_of(const Writer& w, const ir::Node& n) {
  auto it = w.g.initializers.find(n.inputs.at(1));
  if (it == w.g.initializers.end()) throw UnsupportedOpError(n.label() + ": weights are computed; TFLite needs constant weights");
  return it->second;
}

// The fields CONV_2D's and DEPTHWISE_CONV_2D's options share (vtable offsets), and
// the depthwise multiplier (0: none).
struct ConvFields {
  uint16_t padding, stride_w, stride_h, act, dilation_w, dilation_h, depth_multiplier;
};
#define QFX_CONV_FIELDS(T, dm)                                                                                 \
  ConvFields{s::T::kPadding, s::T::kStrideW, s::T::kStrideH, s::T::kFusedActivationFunction, s::T::kDilationWFactor, \
             s::T::kDilationHFactor, static_cast<uint16_t>(dm)}
static_assert(std::is_same_v<s::Conv2DOptionsT::tPadding, int8_t> && std::is_same_v<s::Conv2DOptionsT::tStrideW, int32_t> &&
                  std::is_same_v<s::Conv2DOptionsT::tFusedActivationFunction, int8_t> &&
                  std::is_same_v<s::DepthwiseConv2DOptionsT::tDepthMultiplier, int32_t> &&
                  std::is_same_v<s::DepthwiseConv2DOptionsT::tDilationHFactor, int32_t>,
              "the TFLite schema's conv option types changed");

bool conv(Writer& w, const ir::Node& n) {
  const Value x = w.in(n, n.inputs[0]);
  const Tensor& wt = weight_of(w, n);
  const ir::QInfo& wq = n.in_q[1];
  check_weights(n, wt, wq);
  if (x.shape.size() != 4) throw UnsupportedOpError(n.label() + ": a " + std::to_string(x.shape.size() - 2) + "-D convolution has no TFLite writer here (2-D only)");
  const int64_t O = wt.shape()[0], I = wt.shape()[1], kh = wt.shape()[2], kw = wt.shape()[3], C = x.shape[1];
  const int64_t group = n.attr_i("group", 1);
  const bool depthwise = group > 1 && group == C && I == 1;
  if (group > 1 && !depthwise) throw UnsupportedOpError(n.label() + ": grouped convolution (group " + std::to_string(group) + ") has no TFLite int8 form here");
  const auto st = n.attr_ints("strides", {1, 1}), dil = n.attr_ints("dilations", {1, 1});
  Padding p = padding(n, x.shape, {kh, kw}, st, dil);
  Value in = x;
  if (!p.pads.empty()) in = pad(w, n, x, p.pads);
  const std::vector<int64_t> zero{0, 0, 0, 0};
  const std::vector<int64_t>& pads = p.mode == s::Padding::SAME ? n.attr_ints("pads", zero) : zero;
  Shape ys{in.shape[0], O, window_out(in.shape, 0, kh, st[0], dil[0], pads), window_out(in.shape, 1, kw, st[1], dil[1], pads)};
  // Weights: [O, kh, kw, I] (CONV_2D) or [1, kh, kw, O] (DEPTHWISE_CONV_2D), quantized along O.
  std::string wb(static_cast<size_t>(wt.numel()), '\0');
  const auto* src = wt.data<int8_t>();
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t h = 0; h < kh; ++h)
        for (int64_t c = 0; c < kw; ++c) {
          const int64_t to = depthwise ? (h * kw + c) * O + o : ((o * kh + h) * kw + c) * I + i;
          wb[static_cast<size_t>(to)] = static_cast<char>(src[((o * I + i) * kh + h) * kw + c]);
        }
  const std::vector<int32_t> wshape = depthwise ? std::vector<int32_t>{1, int32_t(kh), int32_t(kw), int32_t(O)}
                                                : std::vector<int32_t>{int32_t(O), int32_t(kh), int32_t(kw), int32_t(I)};
  const int32_t wtensor = w.constant(n.inputs[1], wshape, s::TensorType::INT8, wb, wq.scale,
                                     std::vector<int64_t>(wq.scale.size(), 0), depthwise ? 3 : 0);
  const int32_t b = bias_tensor(w, n, O);
  const Value& y = w.out(n.outputs[0], ys, true, s::TensorType::INT8, &n.out_q);
  const ConvFields f = depthwise ? QFX_CONV_FIELDS(DepthwiseConv2DOptionsT, s::DepthwiseConv2DOptionsT::kDepthMultiplier)
                                 : QFX_CONV_FIELDS(Conv2DOptionsT, 0);
  const int64_t act = fused_activation(n), mode = p.mode, mult = depthwise ? O / C : 0;
  const int64_t sw = st[1], sh = st[0], dw = dil[1], dh = dil[0];
  w.op(depthwise ? s::BuiltinOperator::DEPTHWISE_CONV_2D : s::BuiltinOperator::CONV_2D,
       depthwise ? "DEPTHWISE_CONV_2D" : "CONV_2D", {in.tensor, wtensor, b}, {y.tensor},
       depthwise ? s::BuiltinOptions::DepthwiseConv2DOptions : s::BuiltinOptions::Conv2DOptions, [=](fb::FlatBufferBuilder& fbb) {
         const auto t = fbb.StartTable();
         fbb.AddElement<int8_t>(f.padding, static_cast<int8_t>(mode), 0);
         fbb.AddElement<int32_t>(f.stride_w, static_cast<int32_t>(sw), 0);
         fbb.AddElement<int32_t>(f.stride_h, static_cast<int32_t>(sh), 0);
         if (f.depth_multiplier) fbb.AddElement<int32_t>(f.depth_multiplier, static_cast<int32_t>(mult), 0);
         fbb.AddElement<int8_t>(f.act, static_cast<int8_t>(act), 0);
         fbb.AddElement<int32_t>(f.dilation_w, static_cast<int32_t>(dw), 0);
         fbb.AddElement<int32_t>(f.dilation_h, static_cast<int32_t>(dh), 0);
         return fbb.EndTable(t);
       });
  return true;
}

bool fully_connected(Writer& w, const ir::Node& n) {
  const Value x = w.in(n, n.inputs[0]);
  const Tensor& wt = weight_of(w, n);
  const ir::QInfo& wq = n.in_q[1];
  check_weights(n, wt, wq);
  if (wt.shape().size() != 2) throw UnsupportedOpError(n.label() + ": weights of rank " + std::to_string(wt.shape().size()) + "; FULLY_CONNECTED takes 2-D");
  if (n.attr_f("alpha", 1.0f) != 1.0f || n.attr_f("beta", 1.0f) != 1.0f || n.attr_i("transA", 0) != 0)
    throw UnsupportedOpError(n.label() + ": Gemm with alpha / beta / transA has no FULLY_CONNECTED form");
  // TFLite's weights are [N, K]: Gemm's with transB, MatMul's transposed.
  const bool trans = n.op == "QGemm" && n.attr_i("transB", 0) == 1;
  const int64_t N = trans ? wt.shape()[0] : wt.shape()[1], K = trans ? wt.shape()[1] : wt.shape()[0];
  if (wq.per_channel() && wq.axis != (trans ? 0 : 1))
    throw DataError(n.label() + ": weights are quantized per input channel; TFLite's are per output channel");
  std::string wb(static_cast<size_t>(wt.numel()), '\0');
  for (int64_t a = 0; a < N; ++a)
    for (int64_t k = 0; k < K; ++k) wb[static_cast<size_t>(a * K + k)] = static_cast<char>(wt.data<int8_t>()[trans ? a * K + k : k * N + a]);
  const int32_t wtensor = w.constant(n.inputs[1], {int32_t(N), int32_t(K)}, s::TensorType::INT8, wb, wq.scale,
                                     std::vector<int64_t>(wq.scale.size(), 0), 0);
  const int32_t b = bias_tensor(w, n, N);
  if (x.nhwc) throw UnsupportedOpError(n.label() + ": input is a 4-D activation; flatten it first");
  Shape ys = x.shape;
  ys.back() = N;
  const bool keep = ys.size() > 2;
  const Value& y = w.out(n.outputs[0], ys, false, s::TensorType::INT8, &n.out_q);
  const int64_t act = fused_activation(n);
  w.op(s::BuiltinOperator::FULLY_CONNECTED, "FULLY_CONNECTED", {x.tensor, wtensor, b}, {y.tensor},
       s::BuiltinOptions::FullyConnectedOptions, [=](fb::FlatBufferBuilder& f) {
         const auto t = f.StartTable();
         QFX_TFL_SCALAR(f, FullyConnectedOptionsT, FusedActivationFunction, act);
         QFX_TFL_SCALAR(f, FullyConnectedOptionsT, KeepNumDims, keep);
         return f.EndTable(t);
       });
  return true;
}

Shape broadcast(const ir::Node& n, const Shape& a, const Shape& b) {
  if (a.size() != b.size()) throw UnsupportedOpError(n.label() + ": inputs of ranks " + std::to_string(a.size()) + " and " + std::to_string(b.size()) + " (the TFLite writer broadcasts equal ranks)");
  Shape out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = std::max(a[i], b[i]);
  return out;
}

bool binary(Writer& w, const ir::Node& n) {
  const Value a = w.in(n, n.inputs[0], &n.in_q[0]);
  const Value b = w.in(n, n.inputs[1], &n.in_q[1]);
  if (a.shape.size() == 4 && a.nhwc != b.nhwc) throw UnsupportedOpError(n.label() + ": inputs in different layouts");
  const Value& y = w.out(n.outputs[0], broadcast(n, a.shape, b.shape), a.nhwc, s::TensorType::INT8, &n.out_q);
  const int64_t act = fused_activation(n);
  const bool add = n.op == "QLinearAdd";
  w.op(add ? s::BuiltinOperator::ADD : s::BuiltinOperator::MUL, add ? "ADD" : "MUL", {a.tensor, b.tensor}, {y.tensor},
       add ? s::BuiltinOptions::AddOptions : s::BuiltinOptions::MulOptions, [=](fb::FlatBufferBuilder& f) {
         const auto t = f.StartTable();
         if (add)
           QFX_TFL_SCALAR(f, AddOptionsT, FusedActivationFunction, act);
         else
           QFX_TFL_SCALAR(f, MulOptionsT, FusedActivationFunction, act);
         return f.EndTable(t);
       });
  return true;
}

// MaxPool on codes, QLinearAveragePool, QLinearGlobalAveragePool: Pool2D ops (the
// global one as an AVERAGE_POOL_2D over the whole plane).
bool pool(Writer& w, const ir::Node& n) {
  Value x = w.in(n, n.inputs[0]);
  if (x.shape.size() != 4) throw UnsupportedOpError(n.label() + ": " + std::to_string(x.shape.size() - 2) + "-D pooling has no TFLite writer here (2-D only)");
  const bool global = n.op == "QLinearGlobalAveragePool", max = n.op == "MaxPool";
  const ir::QInfo& oq = max ? x.q : n.out_q;
  if (!max && !same_q(n.in_q[0], n.out_q))
    throw DataError(n.label() + ": TFLite's int8 AVERAGE_POOL_2D keeps its input's scale and zero point; this pool rescales "
                    "(the tflite_like target shares them)");
  if (n.attr_i("ceil_mode", 0) != 0) throw UnsupportedOpError(n.label() + ": ceil_mode pooling has no TFLite form");
  const std::vector<int64_t> k = global ? std::vector<int64_t>{x.shape[2], x.shape[3]} : n.attr_ints("kernel_shape");
  const std::vector<int64_t> st = global ? std::vector<int64_t>{1, 1} : n.attr_ints("strides", {1, 1});
  Padding p = global ? Padding{} : padding(n, x.shape, k, st, {1, 1});
  if (!p.pads.empty() && !max)
    throw UnsupportedOpError(n.label() + ": average pooling with pads that are neither SAME nor VALID has no TFLite form");
  if (!p.pads.empty()) {  // max pooling: PADV2 with the lowest code, then a VALID pool
    x = pad(w, n, x, p.pads, true);
    p.pads.clear();
  }
  if (!max && !global && p.mode == s::Padding::SAME && n.attr_i("count_include_pad", 0) != 0)
    throw UnsupportedOpError(n.label() + ": count_include_pad: TFLite's average pooling leaves the padding out of the count");
  const std::vector<int64_t> zero{0, 0, 0, 0};
  const std::vector<int64_t>& pads = p.mode == s::Padding::SAME ? n.attr_ints("pads", zero) : zero;
  Shape ys{x.shape[0], x.shape[1], window_out(x.shape, 0, k[0], st[0], 1, pads), window_out(x.shape, 1, k[1], st[1], 1, pads)};
  const Value& y = w.out(n.outputs[0], ys, true, s::TensorType::INT8, &oq);
  const int64_t act = max ? 0 : fused_activation(n), mode = p.mode, fh = k[0], fw = k[1], sh = st[0], sw = st[1];
  w.op(max ? s::BuiltinOperator::MAX_POOL_2D : s::BuiltinOperator::AVERAGE_POOL_2D, max ? "MAX_POOL_2D" : "AVERAGE_POOL_2D",
       {x.tensor}, {y.tensor}, s::BuiltinOptions::Pool2DOptions, [=](fb::FlatBufferBuilder& f) {
         const auto t = f.StartTable();
         QFX_TFL_SCALAR(f, Pool2DOptionsT, Padding, mode);
         QFX_TFL_SCALAR(f, Pool2DOptionsT, StrideW, sw);
         QFX_TFL_SCALAR(f, Pool2DOptionsT, StrideH, sh);
         QFX_TFL_SCALAR(f, Pool2DOptionsT, FilterWidth, fw);
         QFX_TFL_SCALAR(f, Pool2DOptionsT, FilterHeight, fh);
         QFX_TFL_SCALAR(f, Pool2DOptionsT, FusedActivationFunction, act);
         return f.EndTable(t);
       });
  return true;
}

// The logical output shape of Flatten / Reshape (0 copies, -1 infers).
Shape reshaped(const Writer& w, const ir::Node& n, const Shape& x) {
  int64_t total = 1;
  for (int64_t d : x) total *= d;
  if (n.op == "Flatten") {
    int64_t axis = n.attr_i("axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(x.size());
    int64_t a = 1;
    for (int64_t i = 0; i < axis; ++i) a *= x[static_cast<size_t>(i)];
    return {a, total / a};
  }
  auto it = w.g.initializers.find(n.inputs.at(1));
  if (it == w.g.initializers.end()) throw UnsupportedOpError(n.label() + ": a shape computed at run time has no TFLite form here");
  Shape out(it->second.data<int64_t>(), it->second.data<int64_t>() + it->second.numel());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) out[i] = x.at(i);
    if (out[i] == -1) infer = static_cast<int64_t>(i);
    else known *= out[i];
  }
  if (infer >= 0) out[static_cast<size_t>(infer)] = total / known;
  return out;
}

bool reshape(Writer& w, const ir::Node& n) {
  Value x = w.in(n, n.inputs[0]);
  const Shape ys = reshaped(w, n, x.shape);
  if (x.nhwc && x.shape[2] * x.shape[3] > 1) {
    // Back to NCHW order first, so the reshape reads elements as ONNX does.
    const int32_t perm = w.constant(n.name + "/perm", {4}, s::TensorType::INT32, i32_bytes({0, 3, 1, 2}));
    const Value& t = w.out(n.name + "/nchw", x.shape, false, s::TensorType::INT8, &x.q);
    w.op(s::BuiltinOperator::TRANSPOSE, "TRANSPOSE", {x.tensor, perm}, {t.tensor});
    x = t;
  }
  std::vector<int32_t> shape(ys.begin(), ys.end());
  if (w.dynamic_batch && !shape.empty()) shape[0] = -1;
  const int32_t st = w.constant(n.name + "/shape", {static_cast<int32_t>(shape.size())}, s::TensorType::INT32, i32_bytes(shape));
  const Value& y = w.out(n.outputs[0], ys, false, s::TensorType::INT8, &x.q);
  w.op(s::BuiltinOperator::RESHAPE, "RESHAPE", {x.tensor, st}, {y.tensor});
  return true;
}

bool concat(Writer& w, const ir::Node& n) {
  std::vector<int32_t> ins;
  Shape ys;
  bool nhwc = false;
  int64_t axis = n.attr_i("axis", 1);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& v = w.in(n, n.inputs[i], &n.in_q.at(i));
    if (i == 0) {
      ys = v.shape;
      nhwc = v.nhwc;
      if (axis < 0) axis += static_cast<int64_t>(ys.size());
    } else {
      if (v.nhwc != nhwc) throw UnsupportedOpError(n.label() + ": inputs in different layouts");
      ys[static_cast<size_t>(axis)] += v.shape[static_cast<size_t>(axis)];
    }
    ins.push_back(v.tensor);
  }
  const int64_t taxis = nhwc ? std::vector<int64_t>{0, 3, 1, 2}[static_cast<size_t>(axis)] : axis;
  const Value& y = w.out(n.outputs[0], ys, nhwc, s::TensorType::INT8, &n.out_q);
  const int64_t act = fused_activation(n);
  w.op(s::BuiltinOperator::CONCATENATION, "CONCATENATION", ins, {y.tensor}, s::BuiltinOptions::ConcatenationOptions,
       [=](fb::FlatBufferBuilder& f) {
         const auto t = f.StartTable();
         QFX_TFL_SCALAR(f, ConcatenationOptionsT, Axis, taxis);
         QFX_TFL_SCALAR(f, ConcatenationOptionsT, FusedActivationFunction, act);
         return f.EndTable(t);
       });
  return true;
}

// QRelu / QClip on their own: RELU, RELU6, RELU_N1_TO_1.
bool activation(Writer& w, const ir::Node& n) {
  const Value x = w.in(n, n.inputs[0]);
  ir::Node as_fused = n;
  as_fused.fused_act = n.op == "QRelu" ? "Relu" : "Clip";
  if (n.op == "QClip") {
    as_fused.clip_lo = n.clip_lo;
    as_fused.clip_hi = n.clip_hi;
  }
  const int64_t act = fused_activation(as_fused);
  const int64_t code = act == s::ActivationFunctionType::RELU    ? s::BuiltinOperator::RELU
                       : act == s::ActivationFunctionType::RELU6 ? s::BuiltinOperator::RELU6
                                                                 : s::BuiltinOperator::RELU_N1_TO_1;
  const Value& y = w.out(n.outputs[0], x.shape, x.nhwc, s::TensorType::INT8, &n.out_q);
  w.op(code, act == s::ActivationFunctionType::RELU ? "RELU" : act == s::ActivationFunctionType::RELU6 ? "RELU6" : "RELU_N1_TO_1",
       {x.tensor}, {y.tensor});
  return true;
}

// TFLite's int8 table of LOGISTIC / TANH (PopulateLookupTable in LiteRT's
// activations.cc): f of each dequantized code in float32, times 1 / output scale,
// rounded half away from zero, plus the zero point, saturated.
int32_t tflite_table_code(bool logistic, int32_t q, const ir::QInfo& xq, const ir::QInfo& yq) {
  const float x = xq.scale[0] * static_cast<float>(q - xq.zero_point[0]);
  const float f = logistic ? 1.0f / (1.0f + std::exp(-x)) : std::tanh(x);
  const int32_t v = static_cast<int32_t>(std::round(f * (1.0f / yq.scale[0]))) + yq.zero_point[0];
  return std::clamp(v, -128, 127);
}

// QLut of one Sigmoid / Tanh: LOGISTIC / TANH. TFLite's int8 kernels fix the output
// qparams (1/256 and -128; 1/128 and 0) and compute their own table, which must
// equal qfx's code for code (a tie rounded otherwise would differ).
bool table(Writer& w, const ir::Node& n) {
  const std::string fn = n.attr_s("function", "");
  const bool logistic = fn == "Sigmoid";
  if (!logistic && fn != "Tanh")
    throw UnsupportedOpError(n.label() + ": a table of " + (fn.empty() ? std::string("an elementwise function") : fn) +
                             " has no TFLite int8 op (tables of Sigmoid and Tanh only: LOGISTIC, TANH)");
  const Value x = w.in(n, n.inputs[0]);
  const float want_scale = logistic ? 1.0f / 256 : 1.0f / 128;
  const int32_t want_zp = logistic ? -128 : 0;
  if (n.out_q.scale[0] != want_scale || n.out_q.zero_point[0] != want_zp)
    throw DataError(n.label() + ": output scale " + std::to_string(n.out_q.scale[0]) + " and zero point " +
                    std::to_string(n.out_q.zero_point[0]) + "; TFLite's int8 " + (logistic ? "LOGISTIC" : "TANH") +
                    " takes " + (logistic ? "1/256 and -128" : "1/128 and 0") +
                    " (fixed output qparams [0, 1] / [-1, 1], as the tflite_like target gives)");
  const auto& codes = n.attrs.at("table").ints;
  for (int32_t q = -128; q <= 127; ++q) {
    const int32_t ours = static_cast<int8_t>(static_cast<uint8_t>(codes[static_cast<size_t>(q + 128)]));
    const int32_t theirs = tflite_table_code(logistic, q, x.q, n.out_q);
    if (ours != theirs)
      throw DataError(n.label() + ": at input code " + std::to_string(q) + " qfx's table gives " + std::to_string(ours) +
                      " and TFLite's " + (logistic ? "LOGISTIC" : "TANH") + " " + std::to_string(theirs));
  }
  const Value& y = w.out(n.outputs[0], x.shape, x.nhwc, s::TensorType::INT8, &n.out_q);
  w.op(logistic ? s::BuiltinOperator::LOGISTIC : s::BuiltinOperator::TANH, logistic ? "LOGISTIC" : "TANH", {x.tensor},
       {y.tensor});
  return true;
}

// QLinearSoftmax: SOFTMAX (beta 1) over TFLite's last dimension, which must be the
// ONNX axis (the channels of an NHWC value).
bool softmax(Writer& w, const ir::Node& n) {
  const Value x = w.in(n, n.inputs[0]);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = n.attr_i("axis", -1);
  if (axis < 0) axis += rank;
  if (axis != (x.nhwc ? 1 : rank - 1))
    throw UnsupportedOpError(n.label() + ": softmax over axis " + std::to_string(axis) +
                             "; TFLite's SOFTMAX runs over the last dimension");
  const Value& y = w.out(n.outputs[0], x.shape, x.nhwc, s::TensorType::INT8, &n.out_q);
  w.op(s::BuiltinOperator::SOFTMAX, "SOFTMAX", {x.tensor}, {y.tensor}, s::BuiltinOptions::SoftmaxOptions,
       [](fb::FlatBufferBuilder& f) {
         const auto t = f.StartTable();
         QFX_TFL_SCALAR(f, SoftmaxOptionsT, Beta, 1.0f);
         return f.EndTable(t);
       });
  return true;
}

const std::map<std::string, std::function<bool(Writer&, const ir::Node&)>>& converters() {
  static const std::map<std::string, std::function<bool(Writer&, const ir::Node&)>> m{
      {"QLinearConv", conv},     {"QGemm", fully_connected},       {"QLinearMatMul", fully_connected},
      {"QLinearAdd", binary},    {"QLinearMul", binary},           {"MaxPool", pool},
      {"QLinearAveragePool", pool}, {"QLinearGlobalAveragePool", pool}, {"Flatten", reshape},
      {"Reshape", reshape},      {"QLinearConcat", concat},        {"QRelu", activation},
      {"QClip", activation},       {"QLut", table},
      {"QLinearSoftmax", softmax}};
  return m;
}

}  // namespace

int64_t fused_activation(const ir::Node& n) {
  if (n.fused_act.empty()) return s::ActivationFunctionType::NONE;
  if (n.fused_act == "Relu") return s::ActivationFunctionType::RELU;
  if (n.fused_act == "Clip" && n.clip_lo == 0.0f && n.clip_hi == 6.0f) return s::ActivationFunctionType::RELU6;
  if (n.fused_act == "Clip" && n.clip_lo == -1.0f && n.clip_hi == 1.0f) return s::ActivationFunctionType::RELU_N1_TO_1;
  throw UnsupportedOpError(n.label() + ": a clip to [" + std::to_string(n.clip_lo) + ", " + std::to_string(n.clip_hi) +
                           "] has no TFLite activation (RELU, RELU6, RELU_N1_TO_1)");
}

bool convert_node(Writer& w, const ir::Node& n) {
  auto it = converters().find(n.op);
  if (it == converters().end()) return false;
  // MaxPool and the shape ops are int8 only when they move codes (their input is int8).
  if ((n.op == "MaxPool" || n.op == "Flatten" || n.op == "Reshape") && !w.in(n, n.inputs[0]).quantized) return false;
  return it->second(w, n);
}

}  // namespace qfx::runtime::tflite
