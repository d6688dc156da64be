// Reference kernels: LSTM and GRU as the ONNX operator spec defines them (float32;
// layout 0: X [seq, batch, input], W [dirs, gates·H, input], R [dirs, gates·H, H],
// B [dirs, 2·gates·H], optional initial_h / initial_c [dirs, batch, H]; outputs Y
// [seq, dirs, batch, H], Y_h and Y_c [dirs, batch, H]); the default activations
// (sigmoid for gates, tanh otherwise), forward, reverse or bidirectional, GRU's
// linear_before_reset either way. Not supported (declined by name): sequence_lens,
// peepholes, clip, input_forget, other activations, layout 1.
#include <cmath>

#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// What one direction of one layer reads: weights [G·H, I] and [G·H, H], biases.
struct Cell {
  const float *w, *r, *wb, *rb;  // wb / rb null without B
  int64_t I, H;
};

// acc[g] = W x + R h (+ biases) for the G gate blocks, into `out` [G·H]; for GRU with
// linear_before_reset the hidden projection of gate `split` goes to `rh` separately.
void project(const Cell& c, int64_t G, const float* x, const float* h, float* wx, float* rh) {
  for (int64_t j = 0; j < G * c.H; ++j) {
    float a = c.wb ? c.wb[j] : 0.0f, b = c.rb ? c.rb[j] : 0.0f;
    for (int64_t i = 0; i < c.I; ++i) a += c.w[j * c.I + i] * x[i];
    for (int64_t i = 0; i < c.H; ++i) b += c.r[j * c.H + i] * h[i];
    wx[j] = a;
    rh[j] = b;
  }
}

// One LSTM step for one batch row: gates i, o, f, c (ONNX order).
void lstm_step(const Cell& c, const float* x, float* h, float* cs, std::vector<float>& wx, std::vector<float>& rh) {
  project(c, 4, x, h, wx.data(), rh.data());
  const int64_t H = c.H;
  for (int64_t k = 0; k < H; ++k) {
    const float i = sigmoid(wx[k] + rh[k]), o = sigmoid(wx[H + k] + rh[H + k]);
    const float f = sigmoid(wx[2 * H + k] + rh[2 * H + k]), g = std::tanh(wx[3 * H + k] + rh[3 * H + k]);
    cs[k] = f * cs[k] + i * g;
    h[k] = o * std::tanh(cs[k]);
  }
}

// One GRU step: gates z, r, h (ONNX order).
void gru_step(const Cell& c, bool before_reset, const float* x, float* h, std::vector<float>& wx, std::vector<float>& rh,
              std::vector<float>& tmp) {
  const int64_t H = c.H;
  if (before_reset) {
    project(c, 3, x, h, wx.data(), rh.data());
  } else {  // the hidden gate projects r ⊙ h: compute z and r first
    project(c, 3, x, h, wx.data(), rh.data());
    for (int64_t k = 0; k < H; ++k) tmp[k] = sigmoid(wx[H + k] + rh[H + k]) * h[k];
    for (int64_t j = 2 * H; j < 3 * H; ++j) {
      float b = c.rb ? c.rb[j] : 0.0f;
      for (int64_t i = 0; i < H; ++i) b += c.r[j * H + i] * tmp[i];
      rh[j] = b;
    }
  }
  for (int64_t k = 0; k < H; ++k) {
    const float z = sigmoid(wx[k] + rh[k]), r = sigmoid(wx[H + k] + rh[H + k]);
    const float n = std::tanh(wx[2 * H + k] + (before_reset ? r * rh[2 * H + k] : rh[2 * H + k]));
    h[k] = (1.0f - z) * n + z * h[k];
  }
}

void check_rnn(const Node& n, const std::vector<Meta>& in, int64_t G) {
  for (const char* a : {"activations", "activation_alpha", "activation_beta"})
    if (n.attrs.count(a)) unsupported(n, std::string("attribute ") + a + " (the default activations only)");
  if (n.attr_f("clip", 0.0f) != 0.0f || n.attr_i("input_forget", 0) != 0 || n.attr_i("layout", 0) != 0)
    unsupported(n, "clip, input_forget or layout 1");
  if (in.size() > 4 && !in[4].shape.empty() && n.inputs.size() > 4 && !n.inputs[4].empty())
    unsupported(n, "sequence_lens (every sequence runs to the full length)");
  if (in.size() > 7 && n.inputs.size() > 7 && !n.inputs[7].empty()) unsupported(n, "peephole weights P");
  if (in[0].shape.size() != 3 || in[1].shape.size() != 3 || in[2].shape.size() != 3)
    bad_shape(n, "X, W and R must have rank 3");
  if (in[1].shape[1] % G != 0 || in[1].shape[2] != in[0].shape[2]) bad_shape(n, "W does not match X and the gates");
}

Kernel rnn(const Node& n, const std::vector<Meta>& in, bool lstm) {
  const int64_t G = lstm ? 4 : 3;
  check_rnn(n, in, G);
  const std::string dir = n.attr_s("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") unsupported(n, "direction '" + dir + "'");
  const int64_t S = in[0].shape[0], N = in[0].shape[1], I = in[0].shape[2];
  const int64_t D = in[1].shape[0], H = in[1].shape[1] / G;
  if (D != (dir == "bidirectional" ? 2 : 1)) bad_shape(n, "W's first dimension does not match the direction");
  if (n.attr_i("hidden_size", H) != H || in[2].shape != Shape{D, G * H, H}) bad_shape(n, "R or hidden_size does not match W");
  auto given = [&](size_t i) { return n.inputs.size() > i && !n.inputs[i].empty() && in.size() > i; };
  if (given(3) && in[3].shape != Shape{D, 2 * G * H}) bad_shape(n, "B must be [directions, 2 · gates · hidden]");
  for (size_t s : {size_t{5}, size_t{6}})
    if (given(s) && in[s].shape != Shape{D, N, H}) bad_shape(n, "initial states must be [directions, batch, hidden]");
  const bool before_reset = n.attr_i("linear_before_reset", 0) != 0, reverse_only = dir == "reverse";
  const bool has_b = given(3), has_h = given(5), has_c = lstm && given(6);
  Kernel k;
  k.outputs = {{{S, D, N, H}, DType::kFloat32}, {{D, N, H}, DType::kFloat32}};
  if (lstm) k.outputs.push_back({{D, N, H}, DType::kFloat32});
  k.run = [=](const In& i, const Out& o) {
    std::vector<float> wx(static_cast<size_t>(G * H)), rh(wx.size()), tmp(static_cast<size_t>(H));
    std::vector<float> hs(static_cast<size_t>(H)), cs(hs.size());
    // Every output is optional (an empty name in the model): written only where present.
    auto out = [&](size_t j) -> float* { return o.size() > j && o[j] ? o[j]->data<float>() : nullptr; };
    float *Y = out(0), *Yh = out(1), *Yc = lstm ? out(2) : nullptr;
    for (int64_t d = 0; d < D; ++d) {
      const Cell c{i[1]->data<float>() + d * G * H * I, i[2]->data<float>() + d * G * H * H,
                   has_b ? i[3]->data<float>() + d * 2 * G * H : nullptr,
                   has_b ? i[3]->data<float>() + d * 2 * G * H + G * H : nullptr, I, H};
      const bool backward = reverse_only || d == 1;
      for (int64_t b = 0; b < N; ++b) {
        float* h = hs.data();
        for (int64_t k2 = 0; k2 < H; ++k2) {
          h[k2] = has_h ? i[5]->data<float>()[(d * N + b) * H + k2] : 0.0f;
          cs[static_cast<size_t>(k2)] = has_c ? i[6]->data<float>()[(d * N + b) * H + k2] : 0.0f;
        }
        for (int64_t step = 0; step < S; ++step) {
          const int64_t t = backward ? S - 1 - step : step;
          const float* x = i[0]->data<float>() + (t * N + b) * I;
          if (lstm) lstm_step(c, x, h, cs.data(), wx, rh);
          else gru_step(c, before_reset, x, h, wx, rh, tmp);
          if (Y) std::copy(h, h + H, Y + ((t * D + d) * N + b) * H);
        }
        if (Yh) std::copy(h, h + H, Yh + (d * N + b) * H);
        if (Yc) std::copy(cs.begin(), cs.end(), Yc + (d * N + b) * H);
      }
    }
  };
  return k;
}

}  // namespace

void register_reference_rnn() {
  add_reference({"LSTM"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return rnn(n, in, true); });
  add_reference({"GRU"}, [](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return rnn(n, in, false); });
}

}  // namespace qfx::runtime
