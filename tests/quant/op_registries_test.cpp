// The op registries against each other: fx's shared unary table (read by the
// float-ONNX reader) and the op catalog's ONNX export agree row by row (an fx graph
// with each row's op, exported to ONNX and read back, is the same call); every ONNX
// op the catalog can write has a runtime schema and a reference kernel, but for the
// gaps listed below with their reasons.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "qfx/error.h"
#include "qfx/fx/graph_module.h"
#include "qfx/fx/onnx_model.h"
#include "qfx/fx/onnx_unary_ops.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/op_catalog.h"
#include "qfx/runtime/op_schema.h"
#include "qfx/runtime/registry.h"

namespace {

using qfx::fx::UnaryOnnxOp;

// The scalar arguments a graph of `r`'s op passes: each attribute argument a value
// other than its default, fixed ones as fixed.
std::vector<double> argument_values(const UnaryOnnxOp& r) {
  std::vector<double> v;
  for (const auto& a : r.arguments) v.push_back(a.attribute.empty() ? a.value : a.value + 0.25);
  return v;
}

// x [2, 3] -> r.target(x, arguments) -> output.
std::shared_ptr<qfx::fx::GraphModule> graph_of(const UnaryOnnxOp& r) {
  auto gm = std::make_shared<qfx::fx::GraphModule>();
  qfx::fx::Graph& g = gm->graph();
  std::vector<qfx::fx::Argument> args = {qfx::fx::Argument(g.placeholder("x"))};
  for (double v : argument_values(r)) args.emplace_back(c10::IValue(v));
  g.output(g.call_function(r.target, std::move(args)));
  return gm;
}

// The call_function nodes of `gm`.
std::vector<const qfx::fx::Node*> calls(const qfx::fx::GraphModule& gm) {
  std::vector<const qfx::fx::Node*> out;
  for (const qfx::fx::Node* n : gm.graph().nodes())
    if (n->op() == qfx::fx::Opcode::kCallFunction) out.push_back(n);
  return out;
}

}  // namespace

TEST(OnnxUnaryTable, RowsAreUniqueAndEachIsACatalogRecordWritingItsOp) {
  const auto& rows = qfx::fx::unary_onnx_ops();
  ASSERT_GE(rows.size(), 20u);
  for (const auto& r : rows) {
    EXPECT_EQ(qfx::fx::find_unary_onnx_op(r.onnx), &r) << r.onnx;
    EXPECT_EQ(qfx::fx::find_unary_aten_op(r.aten), &r) << r.aten;
    EXPECT_EQ(r.target, "aten::" + r.aten);
    const qfx::quant::OpRecord* rec = qfx::quant::op_catalog().find(r.aten);
    ASSERT_NE(rec, nullptr) << r.aten;
    EXPECT_NE(std::find(rec->onnx_ops.begin(), rec->onnx_ops.end(), r.onnx), rec->onnx_ops.end()) << r.aten;
    ASSERT_NE(qfx::quant::op_catalog().onnx_export(r.aten, r.since_opset), nullptr) << r.aten;
  }
  EXPECT_EQ(qfx::fx::find_unary_onnx_op("Gelu"), nullptr);  // a string attribute: its own converter
  // What the quantization side adds to a row: relu is int8 and ends fusions, exp only float.
  EXPECT_EQ(qfx::quant::op_catalog().find("relu")->fused_activation, qfx::quant::FusedActivation::kReLU);
  EXPECT_TRUE(qfx::quant::op_catalog().find("exp")->kinds.empty());
  EXPECT_EQ(qfx::quant::op_catalog().find("hardswish")->onnx.size(), 2u);  // HardSigmoid * x below opset 14
}

TEST(OnnxUnaryTable, EveryRowRoundTripsThroughOnnx) {
  const std::string path = ::testing::TempDir() + "qfx_unary_roundtrip_" + std::to_string(::getpid()) + ".onnx";
  for (const auto& r : qfx::fx::unary_onnx_ops()) {
    SCOPED_TRACE(r.onnx);
    auto gm = graph_of(r);
    qfx::quant::ExportOptions o;
    o.input_shapes = {{2, 3}};
    o.opset = 17;
    o.float_model = true;
    qfx::quant::export_onnx(*gm, path, o);
    auto back = qfx::fx::load_onnx_model(path);
    const auto nodes = calls(*back);
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0]->target(), r.target);
    const auto want = argument_values(r);
    ASSERT_EQ(nodes[0]->args().size(), want.size() + 1);
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& a = nodes[0]->args()[i + 1];
      ASSERT_TRUE(a.is_const() && a.value.isDouble()) << "argument " << i + 1;
      // ONNX attributes are float32: the value read back is the argument rounded to float.
      EXPECT_EQ(a.value.toDouble(), static_cast<double>(static_cast<float>(want[i]))) << "argument " << i + 1;
    }
  }
  std::filesystem::remove(path);
}

TEST(OnnxUnaryTable, ExportRefusesAFixedArgumentOtherThanItsValue) {
  const UnaryOnnxOp& elu = *qfx::fx::find_unary_onnx_op("Elu");
  auto gm = std::make_shared<qfx::fx::GraphModule>();
  qfx::fx::Graph& g = gm->graph();
  g.output(g.call_function(elu.target, {qfx::fx::Argument(g.placeholder("x")), qfx::fx::Argument(c10::IValue(1.0)),
                                        qfx::fx::Argument(c10::IValue(1.0507)), qfx::fx::Argument(c10::IValue(1.0))}));
  qfx::quant::ExportOptions o;
  o.input_shapes = {{2, 3}};
  o.float_model = true;
  try {
    qfx::quant::export_onnx_bytes(*gm, o, nullptr);
    FAIL() << "a SELU-like elu (scale 1.0507) exported as ONNX Elu";
  } catch (const qfx::UnsupportedOpError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 2"), std::string::npos) << e.what();
  }
}

namespace {

// Whether backend "reference" (where every chain ends) registers a kernel for `op`.
bool has_reference_kernel(const std::string& op) {
  const auto ops = qfx::runtime::registered_ops("reference");
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

// ONNX ops the exporter writes that the runtime cannot run, and why. Each is
// checked to be a gap still: a fixed one must leave this list.
const std::map<std::string, std::string>& known_gaps() {
  static const std::map<std::string, std::string> gaps = {
      {"Shape", "the planner evaluates it once per plan from the input's shape (expand, resize, group_norm read the "
                "dynamic batch through it); it has no kernel or schema to run"},
  };
  return gaps;
}

}  // namespace

TEST(CrossRegistry, TheKernelProbeTellsARegisteredOpFromAnUnknownOne) {
  EXPECT_TRUE(has_reference_kernel("Relu"));
  qfx::runtime::OpSchema s;
  s.op = "QfxProbeWithoutKernel";
  qfx::runtime::register_op_schema(s);
  EXPECT_FALSE(has_reference_kernel("QfxProbeWithoutKernel"));
}

TEST(CrossRegistry, EveryOnnxOpTheCatalogWritesHasARuntimeSchemaAndAReferenceKernel) {
  const auto ops = qfx::quant::emitted_onnx_ops();
  ASSERT_GT(ops.size(), 40u);
  for (const char* core : {"QuantizeLinear", "DequantizeLinear", "Conv", "Gemm"})
    EXPECT_NE(std::find(ops.begin(), ops.end(), core), ops.end()) << core;
  std::vector<std::string> gaps;
  for (const auto& op : ops) {
    const bool schema = qfx::runtime::find_op_schema(op) != nullptr, kernel = has_reference_kernel(op);
    const bool listed = known_gaps().count(op) != 0;
    if (!listed) {
      EXPECT_TRUE(schema) << "ONNX " << op << " is written by export_onnx but has no runtime schema";
      EXPECT_TRUE(kernel) << "ONNX " << op << " is written by export_onnx but has no reference kernel";
    } else {
      EXPECT_FALSE(schema && kernel) << "ONNX " << op << " runs now: remove it from known_gaps";
    }
  }
  for (const auto& [op, why] : known_gaps())
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op << " (" << why << ") is no longer written";
}
