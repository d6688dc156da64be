// The leaf-module registry (fx/src/leaves): each record's three readers — the
// TorchScript tracer (make_leaf), the torch.export reader (rebuild_leaf) and
// serialization — on modules built here, against libtorch's own functions.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/modules/activation.h>

#include <set>

#include "../../fx/src/leaves/registry.h"
#include "qfx/fx/serialize.h"
#include "qfx/fx/tracer.h"

namespace qfx::fx {
namespace {

using c10::IValue;
using nlohmann::json;

// A TorchScript module of class torch.nn.modules.<module>.<cls> with `forward_body`
// (one return statement of `x`) and `parameters`; class constants make it a scripted one.
torch::jit::Module script_module(const std::string& module, const std::string& cls,
                                 const std::vector<std::pair<std::string, IValue>>& constants,
                                 const std::string& forward_body,
                                 const std::vector<std::pair<std::string, at::Tensor>>& parameters = {}) {
  torch::jit::Module m(c10::QualifiedName("__torch__.torch.nn.modules." + module + "." + cls));
  for (const auto& [name, v] : constants) m.type()->addConstant(name, v);
  for (const auto& [name, t] : parameters) m.register_parameter(name, t, /*is_buffer=*/false);
  m.define("def forward(self, x):\n    return " + forward_body + "\n");
  return m;
}

at::Tensor run(const LoadedModule& m, const at::Tensor& x) {
  std::vector<IValue> args = {x};
  return m.fn(args).toTensor();
}

// An exported node's inputs: {"name": ..., "arg": ...} in schema order.
json node(const std::vector<std::pair<std::string, json>>& inputs) {
  json n = {{"inputs", json::array()}};
  for (const auto& [name, arg] : inputs) n["inputs"].push_back({{"name", name}, {"arg", arg}});
  return n;
}

json tensor_arg(const std::string& value) { return {{"as_tensor", {{"name", value}}}}; }

// save_module_record then load_module_record; the record's type is checked.
LoadedModule round_trip(const LoadedModule& m, const std::string& type) {
  const IValue rec = save_module_record(*m.module);
  EXPECT_EQ(config_at(rec, "type").toStringRef(), type);
  return load_module_record(rec);
}

TEST(LeafRegistry, EveryRecordServesItsFrontends) {
  const auto& records = detail::leaf_registry().records();
  EXPECT_GE(records.size(), 26u);
  for (const auto& [cls, r] : records) {
    EXPECT_EQ(cls, r.cls);
    EXPECT_TRUE(r.trace) << cls << ": every leaf class is a leaf of the TorchScript tracer";
    EXPECT_EQ(r.export_targets.empty(), !r.rebuild) << cls << ": export targets without a rebuild or the reverse";
    if (!r.tensor_names.empty()) {
      EXPECT_TRUE(r.rebuild) << cls << ": owns tensors but is never rebuilt";
    }
    for (const auto& t : r.export_targets) EXPECT_EQ(t.rfind("aten::", 0), 0u) << cls << ": " << t;
  }
  EXPECT_EQ(detail::leaf_tensor_names("BatchNorm2d"),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(detail::leaf_tensor_names("Conv2d"), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_TRUE(detail::leaf_tensor_names("ReLU").empty());
  EXPECT_TRUE(detail::leaf_tensor_names("Softplus").empty());
}

TEST(LeafRegistry, LeakyReLUTracesRebuildsAndSerializes) {
  const at::Tensor x = at::linspace(-3, 3, 24).reshape({2, 3, 4});
  const at::Tensor want = at::leaky_relu(x, 0.2);
  for (bool scripted : {true, false}) {
    auto sm = script_module("activation", "LeakyReLU",
                            scripted ? std::vector<std::pair<std::string, IValue>>{{"negative_slope", 0.2}, {"inplace", false}}
                                     : std::vector<std::pair<std::string, IValue>>{},
                            "torch.leaky_relu(x, 0.2)");
    auto m = detail::make_leaf(sm);
    ASSERT_TRUE(m) << (scripted ? "scripted" : "traced");
    auto* native = dynamic_cast<torch::nn::LeakyReLUImpl*>(m->module.get());
    ASSERT_NE(native, nullptr);
    EXPECT_DOUBLE_EQ(native->options.negative_slope(), 0.2);
    EXPECT_TRUE(at::allclose(run(*m, x), want));
    EXPECT_TRUE(at::allclose(run(round_trip(*m, "torch.nn.LeakyReLU"), x), want));
  }
  const json n = node({{"self", tensor_arg("x")}, {"negative_slope", {{"as_float", 0.2}}}});
  detail::LeafArgs args{n, [](const std::string&) { return at::Tensor(); }};
  auto rebuilt = detail::rebuild_leaf("LeakyReLU", "aten::leaky_relu", args);
  ASSERT_TRUE(rebuilt);
  EXPECT_TRUE(at::allclose(run(*rebuilt, x), want));
  EXPECT_FALSE(detail::rebuild_leaf("LeakyReLU", "aten::relu", args)) << "another op is not the layer";
  EXPECT_FALSE(detail::rebuild_leaf("Softplus", "aten::softplus", args)) << "no record: stays a call_function";
}

TEST(LeafRegistry, Conv2dSharesItsTensorsInEveryFrontend) {
  const at::Tensor w = at::randn({4, 3, 3, 3}), b = at::randn({4}), x = at::randn({1, 3, 8, 8});
  const at::Tensor want = at::conv2d(x, w, b, {2, 2}, {1, 1});
  auto ints2 = [](int64_t v) { return IValue(c10::ivalue::Tuple::create({IValue(v), IValue(v)})); };
  auto sm = script_module("conv", "Conv2d",
                          {{"stride", ints2(2)}, {"padding", ints2(1)}, {"dilation", ints2(1)}, {"groups", int64_t{1}},
                           {"padding_mode", std::string("zeros")}, {"output_padding", ints2(0)}},
                          "torch.conv2d(x, self.weight, self.bias, [2, 2], [1, 1], [1, 1], 1)",
                          {{"weight", w.clone()}, {"bias", b.clone()}});
  auto m = detail::make_leaf(sm);
  ASSERT_TRUE(m);
  EXPECT_TRUE(at::allclose(run(*m, x), want, 1e-5, 1e-5));
  EXPECT_EQ(m->module->named_parameters()["weight"].data_ptr(), sm.attr("weight").toTensor().data_ptr())
      << "the TorchScript module is re-pointed at the native module's weight";

  const json n = node({{"input", tensor_arg("x")}, {"weight", tensor_arg("p_w")}, {"bias", tensor_arg("p_b")},
                       {"stride", {{"as_ints", {2, 2}}}}, {"padding", {{"as_ints", {1}}}}});
  detail::LeafArgs args{n, [&](const std::string& v) { return v == "p_w" ? w : v == "p_b" ? b : at::Tensor(); }};
  auto rebuilt = detail::rebuild_leaf("Conv2d", "aten::conv2d", args);
  ASSERT_TRUE(rebuilt);
  EXPECT_TRUE(at::allclose(run(*rebuilt, x), want, 1e-5, 1e-5));
  EXPECT_EQ(rebuilt->module->named_parameters()["weight"].data_ptr(), w.data_ptr()) << "shared, not copied";
  const json bad = node({{"input", tensor_arg("x")}, {"weight", tensor_arg("p_w")}, {"stride", {{"as_ints", {1, 1, 1}}}}});
  EXPECT_FALSE(detail::rebuild_leaf("Conv2d", "aten::conv2d", detail::LeafArgs{bad, args.tensor_of}))
      << "a 3-value stride is not a Conv2d";

  // A loaded module has the same options (fresh parameters: the GraphModule file carries those).
  const LoadedModule loaded = round_trip(*m, "torch.nn.Conv2d");
  EXPECT_TRUE(save_module_record(*loaded.module) == save_module_record(*m->module));
}

TEST(LeafRegistry, TracerKeepsARegisteredClassAsOneCallModule) {
  torch::jit::Module net(c10::QualifiedName("__torch__.Net"));
  net.register_module("act", script_module("activation", "LeakyReLU", {{"negative_slope", 0.2}, {"inplace", false}},
                                           "torch.leaky_relu(x, 0.2)"));
  net.register_module("other", script_module("activation", "Softplus", {{"beta", 1.0}, {"threshold", 20.0}},
                                             "torch.softplus(x, 1.0, 20.0)"));
  net.define("def forward(self, x):\n    return self.other.forward(self.act.forward(x))\n");
  auto gm = QuantizationTracer().trace(net);
  std::set<std::string> modules, functions;
  for (const Node* n : gm->graph().nodes()) {
    if (n->op() == Opcode::kCallModule) modules.insert(n->target());
    if (n->op() == Opcode::kCallFunction) functions.insert(n->target());
  }
  EXPECT_EQ(modules, (std::set<std::string>{"act"}));
  EXPECT_TRUE(functions.count("aten::softplus")) << "a class without a record is traced through";
  const at::Tensor x = at::linspace(-3, 3, 12);
  EXPECT_TRUE(at::allclose(gm->forward(x), at::softplus(at::leaky_relu(x, 0.2))));
}

}  // namespace
}  // namespace qfx::fx
