// The op catalog: every spelling resolves to its record, names are claimed once,
// an op's ONNX emission is picked by opset, every op a shipped target names has a
// record, and the runtime's op schemas hold what make_kernel and the QDQ matcher ask.
#include <gtest/gtest.h>

#include <filesystem>

#include "qfx/error.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/op_catalog.h"
#include "qfx/runtime/op_schema.h"

using qfx::quant::OpCatalog;
using qfx::quant::OpKind;
using qfx::quant::OpRecord;

TEST(OpCatalog, EverySpellingResolvesToItsRecord) {
  const OpCatalog& c = qfx::quant::op_catalog();
  ASSERT_GT(c.records().size(), 80u);
  for (const auto& [name, r] : c.records()) {
    EXPECT_EQ(r.name, name);
    for (const auto& a : r.aten) EXPECT_EQ(c.name_of_aten(a), name) << a;
    for (const auto& m : r.modules) EXPECT_EQ(c.name_of_module(m), name) << m;
    // A module class whose call has more than the input needs the module's own emission.
    for (const auto& x : r.onnx) EXPECT_TRUE(x.function || x.module) << name;
  }
  EXPECT_EQ(c.name_of_aten("view"), "reshape");
  EXPECT_EQ(c.name_of_aten("bmm"), "matmul");
  EXPECT_EQ(c.name_of_module("Conv2d"), "conv2d");
  EXPECT_EQ(c.name_of_module("NoSuchModule"), "");
}

TEST(OpCatalog, ANameOrSpellingIsClaimedOnce) {
  OpCatalog c;
  c.add(OpRecord("a").also_aten({"x"}).also_modules({"A"}));
  EXPECT_THROW(c.add(OpRecord("a")), qfx::InternalError);
  EXPECT_THROW(c.add(OpRecord("b").also_aten({"x"})), qfx::InternalError);
  EXPECT_THROW(c.add(OpRecord("c").also_modules({"A"})), qfx::InternalError);
  EXPECT_EQ(c.find("b"), nullptr);
}

TEST(OpCatalog, EmissionIsTheLatestValidForTheOpset) {
  OpCatalog c;
  auto emit = [](qfx::quant::detail::Exporter&, qfx::fx::Node&) {};
  c.add(OpRecord("op").to_onnx(emit, nullptr, 14).to_onnx(emit, nullptr, 7));  // kept sorted by opset
  EXPECT_EQ(c.onnx_export("op", 6), nullptr);
  auto* seven = c.onnx_export("op", 13);
  auto* fourteen = c.onnx_export("op", 17);
  ASSERT_TRUE(seven && fourteen);
  EXPECT_EQ(seven->since_opset, 7);
  EXPECT_EQ(fourteen->since_opset, 14);
  EXPECT_EQ(c.onnx_export("missing", 17), nullptr);
}

TEST(OpCatalog, EveryOpAShippedTargetNamesHasARecordThatAllowsItsKind) {
  const OpCatalog& c = qfx::quant::op_catalog();
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(QFX_SOURCE_DIR) + "/configs/backends")) {
    const auto b = qfx::quant::BackendConfig::load(e.path().string());
    ++files;
    for (const auto& [name, oc] : b.ops) {
      const OpRecord* r = c.find(name);
      ASSERT_NE(r, nullptr) << e.path() << ": " << name;
      EXPECT_NE(std::find(r->kinds.begin(), r->kinds.end(), oc.kind), r->kinds.end()) << name;
    }
  }
  EXPECT_EQ(files, 6) << "the shipped targets: onednn, reference, example_accel, tflite_like, ethos_u, transformer_npu";
  // Ops with weights take weighted or float; the others never weighted.
  for (const char* w : {"conv2d", "linear", "lstm", "gru"})
    EXPECT_EQ(c.find(w)->kinds, qfx::quant::weighted_kinds()) << w;
  EXPECT_EQ(c.find("elu")->kinds, qfx::quant::activation_kinds());
  EXPECT_EQ(c.find("elu")->table_onnx, "Elu");
  EXPECT_EQ(c.find("softplus")->kinds, qfx::quant::activation_kinds());
  EXPECT_EQ(c.find("softplus")->table_onnx, "Softplus");
  ASSERT_NE(c.find("mish"), nullptr);
  EXPECT_EQ(c.find("mish")->onnx.front().since_opset, 1);  // written as Softplus / Tanh / Mul
  EXPECT_EQ(c.find("gelu")->integer_only_onnx, "Gelu");
  EXPECT_TRUE(c.find("size")->kinds.empty());  // always float: not a target's choice
}

TEST(OpSchema, BuiltinsHoldWhatKernelsRelyOn) {
  using qfx::runtime::find_op_schema;
  ASSERT_NE(find_op_schema("QLinearConv"), nullptr);
  EXPECT_TRUE(find_op_schema("QLinearConv")->integer);
  EXPECT_TRUE(find_op_schema("QLinearConv")->wide_input);
  EXPECT_FALSE(find_op_schema("QLinearAdd")->wide_input);
  EXPECT_EQ(find_op_schema("BatchNormalization")->min_inputs, 5u);
  EXPECT_EQ(find_op_schema("Gemm")->float_inputs, 3u);
  EXPECT_FALSE(find_op_schema("QuantizeLinear")->integer);
  EXPECT_TRUE(find_op_schema("Elu")->tabulable);
  EXPECT_FALSE(find_op_schema("Softmax")->tabulable);
  EXPECT_EQ(find_op_schema("NoSuchOp"), nullptr);
  qfx::runtime::OpSchema mine;
  mine.op = "MyVendorOp";
  mine.min_inputs = 3;
  qfx::runtime::register_op_schema(mine);
  EXPECT_EQ(find_op_schema("MyVendorOp")->min_inputs, 3u);
  EXPECT_THROW(qfx::runtime::register_op_schema(qfx::runtime::OpSchema{}), qfx::ArgumentError);
}
