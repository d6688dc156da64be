// Reference kernels: comparisons of float32 tensors (Equal, Less, Greater,
// LessOrEqual, GreaterOrEqual -> bool), Not / And / Or on bool, Where(bool, float32,
// float32), all broadcasting as ONNX (numpy) does.
#include "common.h"

namespace qfx::runtime {
namespace {
using namespace ref;

Kernel compare(const Node& n, const std::vector<Meta>& in) {
  if (in[0].dtype != DType::kFloat32 || in[1].dtype != DType::kFloat32) unsupported(n, "compares float32 inputs only");
  const Shape o = broadcast(n, in[0].shape, in[1].shape), a = in[0].shape, b = in[1].shape;
  Kernel k;
  k.outputs = {{o, DType::kBool}};
  const std::string op = n.op;
  k.run = [o, a, b, op](const In& i, const Out& out) {
    const float* x = i[0]->data<float>();
    const float* y = i[1]->data<float>();
    auto* z = static_cast<uint8_t*>(out[0]->raw());
    auto cmp = [&](auto f) { for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = f(x[q], y[r]) ? 1 : 0; }); };
    if (op == "Equal") cmp([](float u, float v) { return u == v; });
    else if (op == "Less") cmp([](float u, float v) { return u < v; });
    else if (op == "Greater") cmp([](float u, float v) { return u > v; });
    else if (op == "LessOrEqual") cmp([](float u, float v) { return u <= v; });
    else cmp([](float u, float v) { return u >= v; });
  };
  return k;
}

Kernel logic(const Node& n, const std::vector<Meta>& in) {
  for (const auto& m : in)
    if (m.dtype != DType::kBool) unsupported(n, "takes bool inputs");
  const bool is_not = n.op == "Not";
  const Shape o = is_not ? in[0].shape : broadcast(n, in[0].shape, in[1].shape), a = in[0].shape, b = is_not ? a : in[1].shape;
  Kernel k;
  k.outputs = {{o, DType::kBool}};
  const bool is_and = n.op == "And";
  k.run = [o, a, b, is_not, is_and](const In& i, const Out& out) {
    const auto* x = static_cast<const uint8_t*>(i[0]->raw());
    auto* z = static_cast<uint8_t*>(out[0]->raw());
    if (is_not) {
      for (int64_t p = 0; p < i[0]->numel(); ++p) z[p] = x[p] ? 0 : 1;
      return;
    }
    const auto* y = static_cast<const uint8_t*>(i[1]->raw());
    for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = is_and ? (x[q] && y[r]) : (x[q] || y[r]); });
  };
  return k;
}

Kernel where(const Node& n, const std::vector<Meta>& in) {
  if (in[0].dtype != DType::kBool || in[1].dtype != DType::kFloat32 || in[2].dtype != DType::kFloat32)
    unsupported(n, "takes a bool condition and float32 values");
  const Shape xy = broadcast(n, in[1].shape, in[2].shape), o = broadcast(n, in[0].shape, xy);
  const Shape c = in[0].shape, a = in[1].shape, b = in[2].shape;
  Kernel k;
  k.outputs = {{o, DType::kFloat32}};
  k.run = [o, c, a, b](const In& i, const Out& out) {
    const auto* cond = static_cast<const uint8_t*>(i[0]->raw());
    const float* x = i[1]->data<float>();
    const float* y = i[2]->data<float>();
    float* z = out[0]->data<float>();
    // Two broadcasts: the condition against the output, the values against each other.
    std::vector<int64_t> ci(static_cast<size_t>(numel(o)));
    for_each_broadcast(o, c, o, [&](int64_t p, int64_t q, int64_t) { ci[static_cast<size_t>(p)] = q; });
    for_each_broadcast(o, a, b, [&](int64_t p, int64_t q, int64_t r) { z[p] = cond[ci[static_cast<size_t>(p)]] ? x[q] : y[r]; });
  };
  return k;
}

}  // namespace

void register_reference_logic() {
  const auto no_consts = [](auto fn) {
    return [fn](const Node& n, const std::vector<Meta>& in, const std::vector<const Tensor*>&) { return fn(n, in); };
  };
  add_reference({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}, no_consts(compare));
  add_reference({"Not", "And", "Or"}, no_consts(logic));
  add_reference({"Where"}, no_consts(where));
}

}  // namespace qfx::runtime
