// Ops whose output shape comes from values, in a whole model: the planner folds the
// shape arithmetic on the input shapes (Shape -> Gather -> Range / ConstantOfShape /
// TopK's K) once per input shape, as it does for Reshape; CumSum's axis arrives as a
// model input. The model is written with ONNX's protobuf and run at two batch sizes.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "qfx/error.h"
#include "qfx/runtime/model.h"

namespace qfx::runtime {
namespace {

void add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out[0] + "_node");
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name, int elem,
               std::vector<int64_t> dims) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* s = t->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = s->add_dim();
    if (d < 0) dim->set_dim_param("N");
    else dim->set_dim_value(d);
  }
}

void add_int64(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t x : v) t->add_int64_data(x);
}

// x [N, 3] float and an int64 scalar axis -> range = Range(0, N, 1); top_i = the
// indices of TopK(transpose(x), K = N); sum = x + ConstantOfShape(shape(x));
// cum = CumSum(x, axis).
std::string shape_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("shape_ops");
  add_value(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {-1, 3});
  add_value(g->mutable_input(), "axis", onnx::TensorProto::INT64, {});
  add_int64(g, "zero", {}, {0});
  add_int64(g, "one", {}, {1});
  add_int64(g, "first", {1}, {0});
  add_node(g, "Shape", {"x"}, {"shape"});
  add_node(g, "Gather", {"shape", "zero"}, {"n"});
  add_node(g, "Range", {"zero", "n", "one"}, {"range"});
  add_node(g, "Gather", {"shape", "first"}, {"k"});
  add_node(g, "Transpose", {"x"}, {"xt"});
  add_node(g, "TopK", {"xt", "k"}, {"top", "top_i"});
  add_node(g, "ConstantOfShape", {"shape"}, {"zeros"});
  add_node(g, "Add", {"x", "zeros"}, {"sum"});
  add_node(g, "CumSum", {"x", "axis"}, {"cum"});
  add_value(g->mutable_output(), "range", onnx::TensorProto::INT64, {-1});
  add_value(g->mutable_output(), "top_i", onnx::TensorProto::INT64, {3, -1});
  add_value(g->mutable_output(), "sum", onnx::TensorProto::FLOAT, {-1, 3});
  add_value(g->mutable_output(), "cum", onnx::TensorProto::FLOAT, {-1, 3});
  return m.SerializeAsString();
}

TEST(OnnxOpsModel, ValueShapedOpsPlanPerInputShapeAndCumSumTakesAComputedAxis) {
  for (const char* backend : {"reference", "onednn"}) {
    const Model model = Model::load_from_string(shape_model(), ModelOptions(backend), "shape_ops");
    for (int64_t N : {2, 4}) {
      Tensor x({N, 3}, DType::kFloat32), axis({}, DType::kInt64);
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 7) % 5) - 2.0f + 0.1f * static_cast<float>(i);
      axis.data<int64_t>()[0] = -2;  // down the rows
      auto out = model.run({{"x", x}, {"axis", axis}});
      const Tensor& range = out.at("range");
      ASSERT_EQ(range.shape(), (std::vector<int64_t>{N})) << backend;
      for (int64_t i = 0; i < N; ++i) EXPECT_EQ(range.data<int64_t>()[i], i);
      const Tensor& top = out.at("top_i");
      ASSERT_EQ(top.shape(), (std::vector<int64_t>{3, N}));
      for (int64_t c = 0; c < 3; ++c)  // every row index once, the largest x[., c] first
        for (int64_t j = 1; j < N; ++j)
          EXPECT_GE(x.data<float>()[top.data<int64_t>()[c * N + j - 1] * 3 + c], x.data<float>()[top.data<int64_t>()[c * N + j] * 3 + c]);
      const Tensor& sum = out.at("sum");
      const Tensor& cum = out.at("cum");
      for (int64_t i = 0; i < x.numel(); ++i) {
        EXPECT_EQ(sum.data<float>()[i], x.data<float>()[i]);
        const float above = i >= 3 ? cum.data<float>()[i - 3] : 0.0f;
        EXPECT_FLOAT_EQ(cum.data<float>()[i], above + x.data<float>()[i]) << i;
      }
    }
  }
}

}  // namespace
}  // namespace qfx::runtime
