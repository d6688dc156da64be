// The runtime's op table (op_schema.h) against the registries that read it: every
// schema op has a reference kernel, every integer form has a schema, a kernel and a
// QDQ rule, every op with a table form runs as one, and the MAC counts, moving
// ops and integer-op descriptions come from the records.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "../../backends/src/ir.h"
#include "../../backends/src/kernels.h"
#include "../../backends/src/qdq/rules.h"
#include "qfx/runtime/op_schema.h"
#include "qfx/runtime/registry.h"

namespace qfx::runtime {
namespace {

// Schema ops without a reference kernel of their own, and why.
const std::map<std::string, std::string> kNoKernel = {};

bool has_reference_kernel(const std::string& op) {
  static const std::vector<std::string> ops = registered_ops("reference");
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

TEST(OpTable, EverySchemaOpHasAReferenceKernelOrAReason) {
  for (const auto& s : op_schemas()) {
    if (kNoKernel.count(s.op)) {
      EXPECT_FALSE(has_reference_kernel(s.op)) << s.op << " has a kernel now: drop it from kNoKernel";
      continue;
    }
    EXPECT_TRUE(has_reference_kernel(s.op)) << s.op << " has a schema but no reference kernel";
    EXPECT_FALSE(s.summary.empty()) << s.op;
  }
}

TEST(OpTable, EveryReferenceKernelHasASchema) {
  for (const auto& op : registered_ops("reference")) EXPECT_NE(find_op_schema(op), nullptr) << op << " has a kernel but no schema";
}

TEST(OpTable, EveryIntegerFormHasASchemaAKernelAndARule) {
  int forms = 0;
  for (const auto& s : op_schemas()) {
    if (s.qdq_form.empty()) continue;
    ++forms;
    const OpSchema* f = find_op_schema(s.qdq_form);
    ASSERT_NE(f, nullptr) << s.op << "'s integer form " << s.qdq_form << " has no schema";
    EXPECT_TRUE(has_reference_kernel(s.qdq_form)) << s.qdq_form;
    EXPECT_TRUE(f->integer || f->moves_values) << s.qdq_form << " neither computes on codes nor moves them";
    EXPECT_NE(ir::qdq::find_qdq_rule(s.op), nullptr) << s.op << " has an integer form but no QDQ rule";
    EXPECT_FALSE(s.qdq_inputs.empty()) << s.op;
  }
  EXPECT_GE(forms, 15);
  EXPECT_EQ(ir::qdq::find_qdq_rule("Softmax"), nullptr);  // no integer form: stays float between DQ and Q
}

TEST(OpTable, IntegerOnlyOpsAndTableOpsComeFromTheRecords) {
  EXPECT_EQ(integer_only_op_types(), (std::vector<std::string>{"Gelu", "LayerNormalization", "Softmax"}));
  for (const auto& op : lut_op_types()) {
    const OpSchema* s = find_op_schema(op);
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(s->tabulable) << op << ": a table op is also allowed inside a table region";
  }
}

// x -> Q -> DQ -> op -> Q -> DQ -> y, per-tensor uint8 qparams.
ir::Graph qdq_graph(const std::string& op) {
  ir::Graph g;
  g.opset = 13;
  g.inputs = {{"x", DType::kFloat32, {1, 8}}};
  g.outputs = {{"y", DType::kFloat32, {1, 8}}};
  Tensor s({}, DType::kFloat32), z({}, DType::kUInt8);
  s.data<float>()[0] = 0.05f;
  z.data<uint8_t>()[0] = 128;
  g.initializers.emplace("s", s);
  g.initializers.emplace("z", z);
  auto node = [&](const std::string& type, const std::string& name, std::vector<std::string> in, const std::string& out) {
    ir::Node n;
    n.op = type;
    n.name = name;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(n);
  };
  node("QuantizeLinear", "q0", {"x", "s", "z"}, "xq");
  node("DequantizeLinear", "d0", {"xq", "s", "z"}, "xd");
  node(op, "f", {"xd"}, "fy");
  node("QuantizeLinear", "q1", {"fy", "s", "z"}, "yq");
  node("DequantizeLinear", "d1", {"yq", "s", "z"}, "y");
  return g;
}

TEST(OpTable, EveryTableOpRunsAsATableUnderOnnxArithmetic) {
  const auto ops = lut_op_types();
  EXPECT_GE(ops.size(), 7u);
  for (const auto& op : ops) {
    ir::Graph g = qdq_graph(op);
    ir::fuse_qdq(g);
    const bool lut = std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.op == "QLut"; });
    EXPECT_TRUE(lut) << op << " has a table form but its QDQ group did not become a QLut";
  }
}

TEST(OpTable, AnOpWithoutAnIntegerFormStaysFloatAndSaysWhy) {
  ir::Graph g = qdq_graph("Softmax");
  const auto report = ir::fuse_qdq(g);
  ASSERT_EQ(report.size(), 1u);
  EXPECT_NE(report[0].find("Softmax 'f': no int8 kernel for this op"), std::string::npos) << report[0];
  EXPECT_TRUE(std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.op == "Softmax"; }));
}

TEST(OpTable, OpsThatMoveCodesRunOnCodesBetweenIdenticalQparams) {
  for (const char* op : {"Flatten", "Transpose", "Squeeze"}) {
    ASSERT_TRUE(find_op_schema(op)->moves_codes) << op;
    ir::Graph g = qdq_graph(op);
    ir::fuse_qdq(g);
    // The DQ sinks below the op, which then moves the uint8 codes; DQ -> Q pairs with
    // the same qparams cancel: Q, op, DQ remain.
    std::vector<std::string> ops;
    for (const auto& n : g.nodes) ops.push_back(n.op);
    EXPECT_EQ(ops, (std::vector<std::string>{"QuantizeLinear", op, "DequantizeLinear"})) << op;
  }
}

TEST(OpTable, MacCountsAreTheRecords) {
  const std::vector<int64_t> x = {2, 3, 8, 8}, w = {4, 3, 3, 3}, y = {2, 4, 8, 8};
  auto no_attrs = [](const std::string&, int64_t d) { return d; };
  EXPECT_EQ(find_op_schema("Conv")->macs({x, w, y, no_attrs}), 2 * 4 * 8 * 8 * (3 * 3 * 3));
  EXPECT_EQ(find_op_schema("QLinearConv")->macs({x, w, y, no_attrs}), 2 * 4 * 8 * 8 * (3 * 3 * 3));
  const std::vector<int64_t> a = {5, 16}, b = {16, 7}, c = {5, 7};
  EXPECT_EQ(find_op_schema("MatMul")->macs({a, b, c, no_attrs}), 5 * 7 * 16);
  EXPECT_EQ(find_op_schema("Gemm")->macs({a, b, c, [](const std::string& k, int64_t d) { return k == "transA" ? 1 : d; }}),
            5 * 7 * 5);  // transA: the reduction runs over x's first dim
  EXPECT_FALSE(find_op_schema("Relu")->macs);
}

TEST(OpTable, MovingOpsAreBitExactAndComputingOpsAreNot) {
  for (const auto& s : op_schemas()) {
    if (s.moves_values) EXPECT_TRUE(s.bit_exact) << s.op;
    if (s.moves_codes) EXPECT_TRUE(s.moves_values) << s.op;
  }
  EXPECT_TRUE(find_op_schema("DequantizeLinear")->bit_exact);
  EXPECT_FALSE(find_op_schema("Conv")->bit_exact);
  EXPECT_FALSE(find_op_schema("Softmax")->bit_exact);
}

// LogSoftmax (ONNX opset 13) along its axis against the formula in double, with
// values far apart (where log(softmax) would underflow to -inf in float).
TEST(OpTable, LogSoftmaxMatchesTheFormulaInDouble) {
  ir::Node n;
  n.op = "LogSoftmax";
  n.name = "ls";
  n.inputs = {"x"};
  n.outputs = {"y"};
  n.attrs["axis"].i = 1;
  Tensor x({2, 5, 3}, DType::kFloat32), y({2, 5, 3}, DType::kFloat32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37) % 23) * (i % 2 ? 9.5f : -0.75f);
  Kernel k = make_kernel(n, {{{2, 5, 3}, DType::kFloat32}}, {nullptr}, "reference");
  k.run({&x}, {&y});
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 3; ++c) {
      auto at = [&](int64_t j) { return a * 15 + j * 3 + c; };
      double mx = -INFINITY, s = 0;
      for (int64_t j = 0; j < 5; ++j) mx = std::max(mx, static_cast<double>(x.data<float>()[at(j)]));
      for (int64_t j = 0; j < 5; ++j) s += std::exp(x.data<float>()[at(j)] - mx);
      for (int64_t j = 0; j < 5; ++j) {
        const double want = x.data<float>()[at(j)] - mx - std::log(s);
        EXPECT_NEAR(y.data<float>()[at(j)], want, 1e-5 * std::max(1.0, std::abs(want))) << a << "," << j << "," << c;
        EXPECT_TRUE(std::isfinite(y.data<float>()[at(j)]));
      }
    }
}

}  // namespace
}  // namespace qfx::runtime
