// Graph transforms: SubgraphMatcher / replace_pattern with torch.fx's semantics,
// the module-pattern matcher and ShapeProp, each checked against libtorch.
#include <gtest/gtest.h>
#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/version.h>
#include <c10/util/Exception.h>

#include <map>
#include <sstream>

#include "qfx/error.h"
#include "qfx/fx/fusion.h"
#include "qfx/fx/module_matcher.h"
#include "qfx/fx/shape_prop.h"
#include "qfx/fx/subgraph_rewriter.h"
#include "qfx/fx/tracer.h"

using namespace qfx::fx;

namespace {

using Fn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

// A graph module of `fn` on one [2, 3, 4, 5] input (and the input).
std::shared_ptr<GraphModule> traced(const Fn& fn, int inputs = 1) { return trace_function(fn, inputs); }

int count_target(const GraphModule& gm, const std::string& prefix) {
  int n = 0;
  for (Node* node : gm.graph().nodes()) n += node->target().rfind(prefix, 0) == 0;
  return n;
}

}  // namespace

TEST(SubgraphMatcher, PlaceholdersBindConsistentlyAndLiteralsMustMatch) {
  auto pattern = traced([](const std::vector<at::Tensor>& in) { return in[0] * torch::sigmoid(in[0]); });
  // x * sigmoid(x) matches; x * sigmoid(y) does not (one placeholder, two values).
  auto same = traced([](const std::vector<at::Tensor>& in) { return torch::relu(in[0] * torch::sigmoid(in[0])); });
  auto other = traced([](const std::vector<at::Tensor>& in) { return in[0] * torch::sigmoid(in[1]); }, 2);
  SubgraphMatcher m(pattern->graph());
  auto found = m.match(same->graph());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].returning_nodes[0]->target(), "aten::mul.Tensor");
  ASSERT_EQ(found[0].placeholder_nodes.size(), 1u);
  EXPECT_EQ(found[0].placeholder_nodes[0]->op(), Opcode::kPlaceholder);
  EXPECT_TRUE(m.match(other->graph()).empty());
  // Literal arguments must be equal unless ignored.
  auto clip6 = traced([](const std::vector<at::Tensor>& in) { return torch::hardtanh(in[0], 0, 6); });
  auto clip5 = traced([](const std::vector<at::Tensor>& in) { return torch::hardtanh(in[0], 0, 5); });
  EXPECT_EQ(SubgraphMatcher(clip6->graph()).match(clip6->graph()).size(), 1u);
  EXPECT_TRUE(SubgraphMatcher(clip6->graph()).match(clip5->graph()).empty());
  MatchOptions loose;
  loose.ignore_literals = true;
  EXPECT_EQ(SubgraphMatcher(clip6->graph(), loose).match(clip5->graph()).size(), 1u);
}

TEST(SubgraphMatcher, InternalNodesUsedOutsideTheMatchRefuseIt) {
  auto pattern = traced([](const std::vector<at::Tensor>& in) { return torch::relu(torch::sigmoid(in[0])); });
  // sigmoid's value is also returned: replacing relu(sigmoid(x)) would lose it.
  auto escaping = traced([](const std::vector<at::Tensor>& in) {
    at::Tensor s = torch::sigmoid(in[0]);
    return torch::relu(s) + s;
  });
  auto closed = traced([](const std::vector<at::Tensor>& in) { return torch::relu(torch::sigmoid(in[0])) + in[0]; });
  EXPECT_TRUE(SubgraphMatcher(pattern->graph()).match(escaping->graph()).empty());
  EXPECT_EQ(SubgraphMatcher(pattern->graph()).match(closed->graph()).size(), 1u);
}

TEST(SubgraphMatcher, OverlappingMatchesAreDropped) {
  auto pattern = traced([](const std::vector<at::Tensor>& in) { return torch::relu(torch::relu(in[0])); });
  auto chain3 = traced([](const std::vector<at::Tensor>& in) { return torch::relu(torch::relu(torch::relu(in[0]))); });
  EXPECT_EQ(SubgraphMatcher(pattern->graph()).match(chain3->graph()).size(), 1u);
  MatchOptions all;
  all.remove_overlapping_matches = false;
  EXPECT_EQ(SubgraphMatcher(pattern->graph(), all).match(chain3->graph()).size(), 2u);
}

TEST(ReplacePattern, SwishBecomesSiluAndOutputsMatchLibtorch) {
  const Fn model = [](const std::vector<at::Tensor>& in) {
    at::Tensor a = in[0] * torch::sigmoid(in[0]);
    at::Tensor c = a + 1.0;
    at::Tensor b = c * torch::sigmoid(c);
    return b * 2.0 + (a + 1.0) * torch::sigmoid(a + 1.0);  // two different adds: no match
  };
  auto gm = traced(model);
  const at::Tensor x = at::randn({2, 3, 4, 5});
  auto done = replace_pattern(
      *gm, [](const std::vector<at::Tensor>& in) { return in[0] * torch::sigmoid(in[0]); },
      [](const std::vector<at::Tensor>& in) { return torch::silu(in[0]); });
  ASSERT_EQ(done.size(), 2u);
  EXPECT_FALSE(done[0].replacements.empty());
  EXPECT_EQ(count_target(*gm, "aten::silu"), 2);
  EXPECT_EQ(count_target(*gm, "aten::sigmoid"), 1);
  EXPECT_NO_THROW(gm->graph().lint());
  at::NoGradGuard ng;
  EXPECT_TRUE(at::allclose(gm->forward(x), model({x}), 1e-5, 1e-6));
}

// The same rewrite with pattern and replacement written as TorchScript functions.
TEST(ReplacePattern, TorchScriptFunctionPatterns) {
  const Fn model = [](const std::vector<at::Tensor>& in) {
    at::Tensor r = torch::relu(in[0]);
    at::Tensor a = r * torch::sigmoid(r);
    return a * torch::sigmoid(in[0]) + 1.0;  // x * sigmoid(y): no match
  };
  auto gm = traced(model);
  auto pattern = trace_script_function("def swish(x):\n    return x * torch.sigmoid(x)\n");
  auto replacement = trace_script_function("def silu(x: Tensor) -> Tensor:\n    return torch.silu(x)\n");
  EXPECT_EQ(pattern->graph().placeholders().at(0)->name(), "x");
  auto done = replace_pattern(*gm, *pattern, *replacement);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(count_target(*gm, "aten::silu"), 1);
  EXPECT_EQ(count_target(*gm, "aten::sigmoid"), 1);
  const at::Tensor x = at::randn({2, 3, 4, 5});
  at::NoGradGuard ng;
  EXPECT_TRUE(at::allclose(gm->forward(x), torch::silu(torch::relu(x)) * torch::sigmoid(x) + 1.0, 1e-5, 1e-6));
  try {
    trace_script_function("def broken(x):\n    return x +\n");
    ADD_FAILURE() << "expected TraceError";
  } catch (const qfx::TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("does not compile"), std::string::npos) << e.what();
  }
  EXPECT_THROW(trace_script_function("x = 1"), qfx::TraceError);
}

// ReLU(inplace=true) traces to aten::relu_: a relu pattern matches it when nothing
// else reads the tensor it overwrites, and not when something does.
TEST(ReplacePattern, InPlaceVariantsMatchTheirPureOp) {
  const Fn model = [](const std::vector<at::Tensor>& in) {
    at::Tensor a = in[0] * 2.0;
    at::Tensor r = torch::relu_(a);  // `a` read by nothing else
    return r + 1.0;
  };
  auto gm = traced(model);
  ASSERT_EQ(count_target(*gm, "aten::relu_"), 1);
  auto done = replace_pattern(
      *gm, [](const std::vector<at::Tensor>& in) { return torch::relu(in[0]); },
      [](const std::vector<at::Tensor>& in) { return torch::clamp(in[0], 0.0, 6.0); });
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(count_target(*gm, "aten::relu_"), 0);
  const at::Tensor x = at::randn({2, 3, 4, 5}) * 4;
  at::NoGradGuard ng;
  EXPECT_TRUE(at::allclose(gm->forward(x), torch::clamp(x * 2.0, 0.0, 6.0) + 1.0));
  // The overwritten tensor read again through its own node (as a scripted model's
  // graph does after `a.relu_()`): a pure op there would change that read.
  Graph g;
  Node* in = g.placeholder("x");
  Node* a = g.call_function("aten::mul.Scalar", {Argument(in), Argument(c10::IValue(2.0))});
  Node* r = g.call_function("aten::relu_", {Argument(a)});
  g.output(Argument::tuple({Argument(r), Argument(a)}));
  auto pattern = traced([](const std::vector<at::Tensor>& in) { return torch::relu(in[0]); });
  EXPECT_TRUE(SubgraphMatcher(pattern->graph()).match(g).empty());
}

TEST(ReplacePattern, ChainedMatchesRewireOntoEarlierReplacements) {
  // relu(relu(x)): the second match's input is the first match's output.
  auto gm = traced([](const std::vector<at::Tensor>& in) { return torch::relu(torch::relu(in[0]) - 0.5); });
  auto done = replace_pattern(
      *gm, [](const std::vector<at::Tensor>& in) { return torch::relu(in[0]); },
      [](const std::vector<at::Tensor>& in) { return torch::hardtanh(in[0], 0, 6); });
  EXPECT_EQ(done.size(), 2u);
  EXPECT_EQ(count_target(*gm, "aten::relu"), 0);
  const at::Tensor x = at::randn({2, 3, 4, 5}) * 10;
  at::NoGradGuard ng;
  EXPECT_TRUE(at::equal(gm->forward(x), torch::hardtanh(torch::hardtanh(x, 0, 6) - 0.5, 0, 6)));
}

TEST(ReplacePattern, MismatchedArityIsAnError) {
  auto gm = traced([](const std::vector<at::Tensor>& in) { return torch::relu(in[0]); });
  auto p = traced([](const std::vector<at::Tensor>& in) { return torch::relu(in[0]); });
  auto r = traced([](const std::vector<at::Tensor>& in) { return in[0] + in[1]; }, 2);
  EXPECT_THROW(replace_pattern(*gm, *p, *r), qfx::ArgumentError);
}

namespace {
// Collects libtorch warnings (TORCH_WARN) while it lives.
#if TORCH_VERSION_MAJOR >= 2
namespace warning_api = c10::WarningUtils;
#else
namespace warning_api = c10::Warning;  // libtorch 1.13 keeps the guard here
#endif
struct WarningCollector : c10::WarningHandler {
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& w) override { messages.push_back(w.msg()); }
#else
  void process(const c10::SourceLocation&, const std::string& msg, const bool) override { messages.push_back(msg); }
#endif
  std::vector<std::string> messages;
};
}  // namespace

TEST(ReplacePattern, ZeroMatchesWarnNamingTheCauseOrThrowOnRequest) {
  // input -> ReLU module (a call_module leaf, as a traced TorchScript nn.ReLU) -> output
  auto gm = std::make_shared<GraphModule>();
  torch::nn::ReLU act;
  gm->add_submodule("act", act.ptr(), tensor_call_fn(act.ptr()));
  Node* x = gm->graph().placeholder("x");
  gm->graph().output(Argument(gm->graph().call_module("act", {Argument(x)})));
  const Fn relu = [](const std::vector<at::Tensor>& in) { return torch::relu(in[0]); };
  const Fn relu6 = [](const std::vector<at::Tensor>& in) { return torch::clamp(in[0], 0, 6); };
  WarningCollector collect;
  std::vector<ReplacedMatch> done;
  {
    warning_api::WarningHandlerGuard guard(&collect);
    done = replace_pattern(*gm, relu, relu6);
  }
  EXPECT_TRUE(done.empty());
  ASSERT_EQ(collect.messages.size(), 1u);
  EXPECT_NE(collect.messages[0].find("matched nothing"), std::string::npos) << collect.messages[0];
  EXPECT_NE(collect.messages[0].find("aten::relu"), std::string::npos) << collect.messages[0];
  EXPECT_NE(collect.messages[0].find("ReLU modules"), std::string::npos) << collect.messages[0];
  MatchOptions strict;
  strict.on_no_match = MatchOptions::OnNoMatch::kError;
  EXPECT_THROW(replace_pattern(*gm, relu, relu6, 1, strict), qfx::ArgumentError);
  MatchOptions quiet;
  quiet.on_no_match = MatchOptions::OnNoMatch::kIgnore;
  collect.messages.clear();
  {
    warning_api::WarningHandlerGuard guard(&collect);
    EXPECT_TRUE(replace_pattern(*gm, relu, relu6, 1, quiet).empty());
  }
  EXPECT_TRUE(collect.messages.empty());
  // A pattern that matches raises nothing, even with kError.
  auto fn = traced([](const std::vector<at::Tensor>& in) { return torch::relu(in[0]) + 1; });
  EXPECT_EQ(replace_pattern(*fn, relu, relu6, 1, strict).size(), 1u);
}

namespace {
struct ConvBnImpl : torch::nn::Module {
  ConvBnImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
    b1 = register_module("b1", torch::nn::BatchNorm2d(4));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 4, 1)));
    b2 = register_module("b2", torch::nn::BatchNorm2d(4));
  }
  at::Tensor forward(at::Tensor x) {
    at::Tensor y = c2->forward(b1->forward(c1->forward(x)));
    return b2->forward(y) + y;  // c2's value has two users: not a fusable chain
  }
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::BatchNorm2d b1{nullptr}, b2{nullptr};
};
TORCH_MODULE(ConvBn);
}  // namespace

TEST(ModuleMatcher, FindsSingleUserChainsByModuleType) {
  ConvBn net;
  net->eval();
  auto gm = trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); },
                         {at::randn({1, 3, 8, 8})});
  auto chains = match_module_pattern(*gm, {"Conv2d", "BatchNorm2d"});
  ASSERT_EQ(chains.size(), 1u);
  EXPECT_EQ(chains[0][0]->target(), "c1");
  EXPECT_EQ(chains[0][1]->target(), "b1");
  for (Node* n : gm->graph().nodes())
    if (n->op() == Opcode::kCallModule && n->target() == "b2") EXPECT_EQ(module_type_name(*n, *gm), "BatchNorm2d");
  EXPECT_THROW(match_module_pattern(*gm, {}), qfx::ArgumentError);
  // print_tabular names each call_module node's module class.
  std::ostringstream table;
  gm->print_tabular(table);
  const std::string t = table.str();
  EXPECT_NE(t.find("module"), std::string::npos) << t;
  std::map<std::string, std::string> module_of;  // node name -> module column
  std::istringstream lines(t);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cols(line);
    std::string op, name, target, module;
    cols >> op >> name >> target >> module;
    if (op == "call_module") module_of[name] = module;
  }
  EXPECT_EQ(module_of["c1"], "Conv2d") << t;
  EXPECT_EQ(module_of["b1"], "BatchNorm2d") << t;
  EXPECT_EQ(module_of.size(), 4u) << t;
}

TEST(Fusion, FuseConvBnEqualsTheUnfusedModelAndLeavesItIntact) {
  torch::manual_seed(0);
  ConvBn net;
  {  // non-trivial running statistics and affine parameters
    torch::NoGradGuard ng;
    net->train();
    for (int i = 0; i < 3; ++i) net->forward(at::randn({4, 3, 8, 8}) * 3 + 1);
    net->b1->weight.uniform_(0.5, 2);
    net->b1->bias.uniform_(-1, 1);
  }
  net->eval();
  const at::Tensor x = at::randn({2, 3, 8, 8});
  auto gm = trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); }, {x});
  const at::Tensor c1_before = net->c1->weight.clone();
  EXPECT_EQ(fuse_conv_bn(*gm), 1);  // c1+b1; c2's value has two users
  EXPECT_EQ(gm->get_submodule("b1"), nullptr);
  EXPECT_NE(gm->get_submodule("b2"), nullptr);
  torch::NoGradGuard ng;
  const at::Tensor want = net->forward(x), got = gm->forward(x);
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-5 * want.abs().max().item<double>());
  EXPECT_TRUE(net->c1->weight.equal(c1_before));
  EXPECT_EQ(fuse_conv_bn(*gm), 0);
}

TEST(Fusion, FuseConvBnEvalOneAndThreeDimensionsAndErrors) {
  torch::manual_seed(1);
  torch::nn::Conv1d c1(torch::nn::Conv1dOptions(4, 6, 3).groups(2).bias(false));
  torch::nn::BatchNorm1d b1(6);
  {
    torch::NoGradGuard ng;
    b1->running_mean.uniform_(-1, 1);
    b1->running_var.uniform_(0.5, 2);
    b1->weight.uniform_(0.5, 2);
  }
  EXPECT_THROW(fuse_conv_bn_eval(c1, b1), qfx::ArgumentError);  // training mode
  c1->eval();
  b1->eval();
  torch::NoGradGuard ng;
  const at::Tensor x1 = at::randn({2, 4, 9});
  const at::Tensor want1 = b1->forward(c1->forward(x1));
  EXPECT_LT((fuse_conv_bn_eval(c1, b1)->forward(x1) - want1).abs().max().item<double>(), 1e-5 * want1.abs().max().item<double>());
  torch::nn::Conv3d c3(torch::nn::Conv3dOptions(2, 3, 3).padding(1));
  torch::nn::BatchNorm3d b3(3);
  b3->running_var.fill_(0.25);
  c3->eval();
  b3->eval();
  const at::Tensor x3 = at::randn({1, 2, 4, 5, 6});
  const at::Tensor want3 = b3->forward(c3->forward(x3));
  EXPECT_LT((fuse_conv_bn_eval(c3, b3)->forward(x3) - want3).abs().max().item<double>(), 1e-5 * want3.abs().max().item<double>());
  torch::nn::BatchNorm1d wrong(5);
  wrong->eval();
  EXPECT_THROW(fuse_conv_bn_eval(c1, wrong), qfx::ArgumentError);
}

TEST(ShapeProp, RecordsShapesDtypesAndLayoutsOfEveryNode) {
  ConvBn net;
  net->eval();
  auto gm = trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); },
                         {at::randn({1, 3, 8, 8})});
  propagate_shapes(*gm, {{2, 3, 10, 10}});
  int with_shape = 0;
  for (Node* n : gm->graph().nodes()) {
    if (n->op() == Opcode::kOutput) continue;
    ASSERT_TRUE(n->meta().count("shape")) << n->name();
    ++with_shape;
    EXPECT_EQ(n->meta().at("dtype").toStringRef(), "Float") << n->name();
  }
  EXPECT_GE(with_shape, 6);
  const Node* last = gm->graph().output_node()->args()[0].node;
  EXPECT_EQ(last->meta().at("shape").toIntVector(), (std::vector<int64_t>{2, 4, 8, 8}));
  EXPECT_EQ(last->meta().at("memory_format").toStringRef(), "contiguous");
  std::ostringstream table;
  gm->print_tabular(table);
  EXPECT_NE(table.str().find("[2, 4, 8, 8]"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("dtype"), std::string::npos);
}
