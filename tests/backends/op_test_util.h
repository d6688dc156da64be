// Helpers of the reference kernel tests: a node with attributes, typed tensors, and one
// kernel run through the registry (make_kernel, as the planner calls it).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "../../backends/src/ir.h"
#include "../../backends/src/kernels.h"
#include "qfx/error.h"

namespace qfx::runtime::test {

/// Expected values, as `values` returns them.
using V = std::vector<double>;
/// The int64 ends.
constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();

/// A node `op` named "n" reading inputs "i0".."i{inputs-1}" and writing "o0".."o{outputs-1}".
inline ir::Node op_node(const std::string& op, size_t inputs, size_t outputs = 1) {
  ir::Node n;
  n.op = op;
  n.name = "n";
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back("i" + std::to_string(i));
  for (size_t i = 0; i < outputs; ++i) n.outputs.push_back("o" + std::to_string(i));
  return n;
}

inline void set_i(ir::Node& n, const std::string& a, int64_t v) {
  n.attrs[a].kind = ir::Attr::Kind::kInt;
  n.attrs[a].i = v;
}
inline void set_f(ir::Node& n, const std::string& a, float v) {
  n.attrs[a].kind = ir::Attr::Kind::kFloat;
  n.attrs[a].f = v;
}
inline void set_ints(ir::Node& n, const std::string& a, std::vector<int64_t> v) {
  n.attrs[a].kind = ir::Attr::Kind::kInts;
  n.attrs[a].ints = std::move(v);
}
inline void set_s(ir::Node& n, const std::string& a, const std::string& v) {
  n.attrs[a].kind = ir::Attr::Kind::kString;
  n.attrs[a].s = v;
}

/// A tensor of `dtype` and `shape` holding `v` (converted with static_cast; bool: v != 0).
inline Tensor make(DType dtype, std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor t(std::move(shape), dtype);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size()) << "test tensor size";
  for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < t.numel(); ++i) {
    switch (dtype) {
      case DType::kFloat32: t.data<float>()[i] = static_cast<float>(v[i]); break;
      case DType::kInt64: t.data<int64_t>()[i] = static_cast<int64_t>(v[i]); break;
      case DType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(v[i]); break;
      case DType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(v[i]); break;
      case DType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>(v[i]); break;
      case DType::kUInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]); break;
      case DType::kBool: t.data<uint8_t>()[i] = v[i] != 0; break;
    }
  }
  return t;
}
inline Tensor f32(std::vector<int64_t> s, const std::vector<double>& v) { return make(DType::kFloat32, std::move(s), v); }
inline Tensor i64(std::vector<int64_t> s, const std::vector<double>& v) { return make(DType::kInt64, std::move(s), v); }
inline Tensor i32(std::vector<int64_t> s, const std::vector<double>& v) { return make(DType::kInt32, std::move(s), v); }
inline Tensor boolean(std::vector<int64_t> s, const std::vector<double>& v) { return make(DType::kBool, std::move(s), v); }

/// An int64 tensor from exact int64 values (beyond double's 53 bits).
inline Tensor i64v(std::vector<int64_t> s, const std::vector<int64_t>& v) {
  Tensor t(std::move(s), DType::kInt64);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

/// Element i of `t` as double (bool as 0 / 1).
inline double at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[i];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kInt16: return t.data<int16_t>()[i];
    case DType::kInt8: return t.data<int8_t>()[i];
    default: return t.data<uint8_t>()[i];
  }
}

/// All elements of `t` as doubles.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(at(t, i));
  return v;
}

/// Builds `n`'s reference kernel at `inputs` (those listed in `known` passed as
/// constants, as the planner passes initializers and folded values) and runs it.
inline std::vector<Tensor> run_op(const ir::Node& n, const std::vector<Tensor>& inputs, const std::vector<size_t>& known = {}) {
  std::vector<Meta> in;
  std::vector<const Tensor*> consts(inputs.size(), nullptr), ptrs;
  for (const auto& t : inputs) {
    in.push_back({t.shape(), t.dtype()});
    ptrs.push_back(&t);
  }
  for (size_t k : known) consts[k] = &inputs[k];
  Kernel k = make_kernel(n, in, consts, "reference");
  std::vector<Tensor> out;
  for (const auto& m : k.outputs) out.emplace_back(m.shape, m.dtype);
  std::vector<Tensor*> outs;
  for (auto& t : out) outs.push_back(&t);
  k.run(ptrs, outs);
  return out;
}

/// The message of the qfx::Error `f` throws ("" when it throws nothing); another
/// exception type fails the test.
template <typename E = Error>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return e.what();
  }
  return "";
}

}  // namespace qfx::runtime::test
