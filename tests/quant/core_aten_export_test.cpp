// Core ATen ops as torch.export writes them (overloaded targets such as
// aten::squeeze.dims, kwargs such as _to_copy's dtype) through export_onnx: each
// one-op graph is exported as a float model, run on qfx's runtime and compared with
// the same graph run by the fx Interpreter (PyTorch's own kernels).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/version.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qfx/error.h"
#include "qfx/fx/graph_module.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/runtime/model.h"

namespace {

using qfx::fx::Argument;
using qfx::fx::Graph;
using qfx::fx::Node;

// Builds the graph's body over its placeholders; returns the output value.
using Body = std::function<Node*(Graph&, const std::vector<Node*>&)>;

// A graph with one float placeholder per input ("x0", "x1", ...) and `body`.
std::shared_ptr<qfx::fx::GraphModule> graph_of(size_t inputs, const Body& body) {
  auto gm = std::make_shared<qfx::fx::GraphModule>();
  Graph& g = gm->graph();
  std::vector<Node*> xs;
  for (size_t i = 0; i < inputs; ++i) xs.push_back(g.placeholder("x" + std::to_string(i)));
  g.output(Argument(body(g, xs)));
  return gm;
}

// The ONNX model export_onnx writes for `gm` (float, opset 17, static input shapes).
std::string exported(qfx::fx::GraphModule& gm, const std::vector<at::Tensor>& inputs) {
  qfx::quant::ExportOptions o;
  for (const auto& t : inputs) o.input_shapes.push_back(t.sizes().vec());
  o.opset = 17;
  o.float_model = true;
  return qfx::quant::export_onnx_bytes(gm, o, nullptr);
}

// The runtime's single output of `onnx` on `inputs` (graph inputs in order), as ATen.
at::Tensor run_onnx(const std::string& onnx, const std::vector<at::Tensor>& inputs) {
  const auto model = qfx::runtime::Model::load_from_string(onnx);
  std::map<std::string, qfx::runtime::Tensor> feed;
  for (size_t i = 0; i < inputs.size(); ++i) feed.emplace("x" + std::to_string(i), qfx::quant::runtime_view(inputs[i]));
  const auto out = model.run(feed);
  EXPECT_EQ(out.size(), 1u);
  const qfx::runtime::Tensor& y = out.begin()->second;
  static const std::map<qfx::runtime::DType, at::ScalarType> others = {
      {qfx::runtime::DType::kBool, at::kBool}, {qfx::runtime::DType::kInt64, at::kLong}, {qfx::runtime::DType::kInt32, at::kInt}};
  auto it = others.find(y.dtype());
  if (it != others.end()) return at::from_blob(const_cast<void*>(y.raw()), y.shape(), it->second).clone();
  return qfx::quant::aten_view(y).clone();
}

// Exports `body` over `inputs`, runs both sides and compares (1e-5 relative; bool and
// shape exactly). Returns the exported model for checks of its nodes.
std::string expect_matches_pytorch(const std::vector<at::Tensor>& inputs, const Body& body) {
  auto gm = graph_of(inputs.size(), body);
  std::vector<c10::IValue> in(inputs.begin(), inputs.end());
  const at::Tensor want = gm->forward(in).toTensor();
  const std::string onnx = exported(*gm, inputs);
  const at::Tensor got = run_onnx(onnx, inputs);
  EXPECT_EQ(got.sizes(), want.sizes());
  if (!at::isFloatingType(want.scalar_type())) {
    EXPECT_EQ(got.scalar_type(), want.scalar_type());
    EXPECT_TRUE(at::equal(got, want)) << "got " << got << "\nwant " << want;
  } else {
    EXPECT_TRUE(at::allclose(got, want.to(at::kFloat), 1e-5, 1e-6)) << "got " << got << "\nwant " << want;
  }
  return onnx;
}

// How many nodes of ONNX type `op` the serialized model holds: NodeProto.op_type is
// field 4 (wire tag 0x22), then its length, then the name (node names are field 3).
size_t count_op(const std::string& onnx, const std::string& op) {
  const std::string key = std::string("\x22") + static_cast<char>(op.size()) + op;
  size_t k = 0;
  for (size_t at = onnx.find(key); at != std::string::npos; at = onnx.find(key, at + 1)) ++k;
  return k;
}

Node* call(Graph& g, const std::string& target, std::vector<Argument> args) { return g.call_function(target, std::move(args)); }

}  // namespace

TEST(CoreAtenExport, SqueezeDimsSqueezesEveryListedDimOfSizeOne) {
#if TORCH_VERSION_MAJOR < 2
  GTEST_SKIP() << "aten::squeeze.dims is an operator of libtorch 2.0 and newer (this is " << TORCH_VERSION << ")";
#endif
  const at::Tensor x = at::randn({2, 1, 3, 1, 1});
  // dims 1 and -1 have size 1, dim 2 (size 3) stays as aten leaves it: [2, 3, 1].
  expect_matches_pytorch({x}, [](Graph& g, const std::vector<Node*>& xs) {
    return call(g, "aten::squeeze.dims", {xs[0], c10::IValue(std::vector<int64_t>{1, 2, -1})});
  });
}

TEST(CoreAtenExport, SqueezeDimOfAnotherSizeIsTheIdentity) {
  const at::Tensor x = at::randn({2, 3});
  expect_matches_pytorch({x}, [](Graph& g, const std::vector<Node*>& xs) {
    return call(g, "aten::squeeze.dim", {xs[0], c10::IValue(int64_t{1})});
  });
}

TEST(CoreAtenExport, AliasAndDetachWriteNoNode) {
  const at::Tensor x = at::randn({2, 3});
  const std::string onnx = expect_matches_pytorch({x}, [](Graph& g, const std::vector<Node*>& xs) {
    return call(g, "aten::relu", {call(g, "aten::detach", {call(g, "aten::alias", {xs[0]})})});
  });
  auto relu = graph_of(1, [](Graph& g, const std::vector<Node*>& xs) { return call(g, "aten::relu", {xs[0]}); });
  EXPECT_EQ(count_op(onnx, "Identity"), count_op(exported(*relu, {x}), "Identity"));  // the output's own, if any
  EXPECT_EQ(count_op(onnx, "Relu"), 1u);
}

TEST(CoreAtenExport, ToCopyCastsToItsDtypeKeyword) {
  const at::Tensor x = at::randn({2, 3}) * 10;
  // float -> int64 truncates toward zero in aten and in ONNX Cast; then back to float.
  const std::string onnx = expect_matches_pytorch({x}, [](Graph& g, const std::vector<Node*>& xs) {
    Node* i = g.call_function("aten::_to_copy", {xs[0]}, {{"dtype", Argument(c10::IValue(static_cast<int64_t>(at::kLong)))}});
    return g.call_function("aten::_to_copy", {i}, {{"dtype", Argument(c10::IValue(static_cast<int64_t>(at::kFloat)))}});
  });
  EXPECT_EQ(count_op(onnx, "Cast"), 2u);
}

TEST(CoreAtenExport, ToCopyWithoutADtypeIsTheIdentity) {
  const at::Tensor x = at::randn({2, 3});
  const std::string onnx = expect_matches_pytorch({x}, [](Graph& g, const std::vector<Node*>& xs) {
    Node* c = g.call_function("aten::_to_copy", {xs[0]}, {{"memory_format", Argument(c10::IValue(static_cast<int64_t>(at::MemoryFormat::Contiguous)))}});
    return call(g, "aten::relu", {c});
  });
  EXPECT_EQ(count_op(onnx, "Cast"), 0u);
}
