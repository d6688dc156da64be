// QuantizationTracer on TorchScript fixtures exported by tools/fixtures/export_models.py:
// traced GraphModules must reproduce the outputs PyTorch recorded for the original
// modules, keep wrapped calls whole, share parameters, and let gradients reach
// every parameter.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"
#include <ATen/ATen.h>

#include <fstream>
#include <set>

#include "fixtures.h"
#include "qfx/error.h"
#include "qfx/fx/module_matcher.h"
#include "qfx/fx/op_libraries.h"
#include "qfx/fx/tracer.h"

using namespace qfx::fx;
using qfx::test::fixture;
using qfx::test::load_tensor_list;
using qfx::test::rel_error;

namespace {

struct Traced {
  torch::jit::Module module;
  std::shared_ptr<GraphModule> gm;
};

Traced trace(const std::string& name, bool train, TracerOptions opts = {}) {
  auto m = load_torchscript(fixture(name + ".pt"));
  m.train(train);
  QuantizationTracer tracer(std::move(opts));
  auto gm = tracer.trace(m);
  return {m, gm};
}

std::vector<c10::IValue> outputs_of(const c10::IValue& v) {
  if (v.isTuple()) return v.toTupleRef().elements().vec();
  if (v.isList()) return v.toListRef().vec();
  return {v};
}

// Runs the traced module on the recorded inputs and compares with the recorded
// outputs of the original module (exported by PyTorch).
void expect_matches_recording(const std::string& name, bool train, TracerOptions opts = {}) {
  SCOPED_TRACE(name + (train ? " (train)" : " (eval)"));
  auto t = trace(name, train, std::move(opts));
  auto inputs = load_tensor_list(fixture(name + ".in.pt"));
  auto expected = load_tensor_list(fixture(name + (train ? ".out_train.pt" : ".out_eval.pt")));
  at::NoGradGuard ng;
  auto got = outputs_of(t.gm->forward(inputs));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const at::Tensor g = got[i].toTensor(), e = expected[i].toTensor();
    ASSERT_EQ(g.sizes(), e.sizes());
    ASSERT_EQ(g.scalar_type(), e.scalar_type());
    if (e.is_floating_point()) {
      EXPECT_LE(rel_error(g, e), 1e-5) << "output " << i;
    } else {
      EXPECT_TRUE(at::equal(g, e)) << "output " << i;
    }
  }
}

// The TraceError message tracing fixture `name` gives ("" and a test failure if none).
std::string trace_error(const std::string& name) {
  try {
    trace(name, false);
  } catch (const qfx::TraceError& e) {
    return e.what();
  }
  ADD_FAILURE() << name << ": expected a TraceError";
  return "";
}

std::vector<const Node*> nodes_with(const GraphModule& gm, Opcode op) {
  std::vector<const Node*> out;
  for (const Node* n : gm.graph().nodes()) if (n->op() == op) out.push_back(n);
  return out;
}

std::set<std::string> targets(const GraphModule& gm, Opcode op) {
  std::set<std::string> out;
  for (const Node* n : nodes_with(gm, op)) out.insert(n->target());
  return out;
}

}  // namespace

// ---- torchvision models, scripted and traced ------------------------------------------

class TorchvisionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchvisionTest, OutputsMatchPyTorch) { expect_matches_recording(GetParam(), /*train=*/false); }

TEST_P(TorchvisionTest, StandardModulesAreLeavesWithDottedNames) {
  auto t = trace(GetParam(), false);
  auto mods = targets(*t.gm, Opcode::kCallModule);
  const bool resnet = GetParam().rfind("resnet", 0) == 0;
  for (const char* expected : resnet ? std::vector<const char*>{"conv1", "bn1", "layer1.0.conv1", "layer4.1.bn2",
                                                               "layer2.0.downsample.0", "fc"}
                                     : std::vector<const char*>{"features.0.0", "features.1.conv.0.0",
                                                               "features.17.conv.2", "classifier.1"}) {
    EXPECT_TRUE(mods.count(expected)) << expected;
  }
  // Every conv / bn / linear of the model is a leaf: count their weights.
  size_t convs_bns_fcs = 0;
  for (const auto& p : t.module.named_parameters(true)) {
    if (p.name.size() > 7 && p.name.substr(p.name.size() - 7) == ".weight") ++convs_bns_fcs;
  }
  size_t weighted_leaves = 0;
  for (const auto& path : mods) {
    if (t.gm->has_attr(path + ".weight")) ++weighted_leaves;
  }
  EXPECT_EQ(weighted_leaves, convs_bns_fcs);
  EXPECT_TRUE(nodes_with(*t.gm, Opcode::kCallMethod).empty());
  t.gm->graph().lint();
}

TEST_P(TorchvisionTest, ParametersAreSharedWithTheTorchScriptModule) {
  auto t = trace(GetParam(), false);
  auto gm_params = t.gm->named_parameters(true);
  auto sm_params = t.module.named_parameters(true);
  size_t n = 0;
  for (const auto& p : sm_params) {
    auto* mine = gm_params.find(p.name);
    ASSERT_NE(mine, nullptr) << p.name;
    EXPECT_EQ(mine->unsafeGetTensorImpl(), p.value.unsafeGetTensorImpl()) << p.name;
    ++n;
  }
  EXPECT_EQ(gm_params.size(), n);
  // Same tensors: an in-place update through the GraphModule shows in TorchScript.
  at::NoGradGuard ng;
  std::string first;
  for (const auto& p : sm_params) { first = p.name; break; }
  t.gm->named_parameters(true)[first].fill_(0.25);
  for (const auto& p : t.module.named_parameters(true)) {
    if (p.name == first) {
      EXPECT_EQ(p.value.flatten()[0].item<float>(), 0.25f);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TorchvisionTest,
                         ::testing::Values("resnet18_scripted", "resnet18_traced", "mobilenet_v2_scripted",
                                           "mobilenet_v2_traced"));

TEST(Tracer, BackwardReachesEveryParameter) {
  for (const char* name : {"resnet18_scripted", "mobilenet_v2_traced", "zoo_scripted"}) {
    SCOPED_TRACE(name);
    auto t = trace(name, /*train=*/true);
    auto inputs = load_tensor_list(fixture(std::string(name) + ".in.pt"));
    if (std::string(name).rfind("zoo", 0) != 0) inputs[0] = inputs[0].toTensor().narrow(2, 0, 64).narrow(3, 0, 64).repeat({2, 1, 1, 1});
    auto out = t.gm->forward(inputs).toTensor();
    out.pow(2).sum().backward();
    size_t with_grad = 0, total = 0;
    for (const auto& p : t.gm->named_parameters(true)) {
      ++total;
      if (p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0) ++with_grad;
      else ADD_FAILURE() << "no gradient reached " << p.key();
    }
    EXPECT_EQ(with_grad, total);
    EXPECT_GT(total, 5u);
  }
}

// ---- a zoo of leaf types and ops ------------------------------------------------------

TEST(Tracer, ZooMatchesPyTorchInEvalAndTrain) {
  expect_matches_recording("zoo_scripted", false);
  expect_matches_recording("zoo_scripted", true);
  expect_matches_recording("zoo_traced", false);
}

TEST(Tracer, ZooLeavesCoverTheStandardModules) {
  auto t = trace("zoo_scripted", false);
  std::set<std::string> types;
  for (const Node* n : nodes_with(*t.gm, Opcode::kCallModule)) {
    std::string ty = n->meta().at("module_type").toStringRef();
    types.insert(ty.substr(ty.rfind('.') + 1));
  }
  for (const char* ty : {"Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "Linear", "BatchNorm1d", "BatchNorm2d",
                         "BatchNorm3d", "LeakyReLU", "Hardswish", "Hardsigmoid", "SiLU", "Sigmoid", "Tanh", "Softmax",
                         "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Dropout", "Identity", "Flatten", "LayerNorm",
                         "Upsample"}) {
    EXPECT_TRUE(types.count(ty)) << ty << " is not a call_module leaf";
  }
  // The user module parameter `blocks.0.scale` is a get_attr with its dotted path.
  EXPECT_TRUE(targets(*t.gm, Opcode::kGetAttr).count("blocks.0.scale"));
  auto fns = targets(*t.gm, Opcode::kCallFunction);
  EXPECT_TRUE(fns.count("aten::mul.Tensor"));
  EXPECT_TRUE(fns.count("aten::relu"));
}

// ---- wrap annotations -----------------------------------------------------------------

TEST(Tracer, WrappedMethodIsOneCallMethodNodeAndFollowsTrainEval) {
  auto t = trace("wrap_example", /*train=*/false);
  auto methods = nodes_with(*t.gm, Opcode::kCallMethod);
  ASSERT_EQ(methods.size(), 1u);
  EXPECT_EQ(methods[0]->target(), "_post_process");
  EXPECT_TRUE(nodes_with(*t.gm, Opcode::kCallFunction).empty());
  auto inputs = load_tensor_list(fixture("wrap_example.in.pt"));
  auto eval_expected = load_tensor_list(fixture("wrap_example.out_eval.pt"))[0].toTensor();
  auto train_expected = load_tensor_list(fixture("wrap_example.out_train.pt"))[0].toTensor();
  at::NoGradGuard ng;
  at::Tensor e = t.gm->forward(inputs).toTensor();
  EXPECT_EQ(e.scalar_type(), at::kLong);  // argmax
  EXPECT_TRUE(at::equal(e, eval_expected));
  // The same GraphModule in train mode: the wrapped method now takes its softmax
  // branch, and batch norm uses batch statistics.
  t.gm->train();
  at::Tensor tr = t.gm->forward(inputs).toTensor();
  EXPECT_EQ(tr.scalar_type(), at::kFloat);
  ASSERT_EQ(tr.sizes(), train_expected.sizes());
  EXPECT_LE(rel_error(tr, train_expected), 1e-5);
  t.gm->eval();
  EXPECT_EQ(t.gm->forward(inputs).toTensor().scalar_type(), at::kLong);
}

TEST(Tracer, UnwrappedMethodFoldsTrainingAtTraceTime) {
  // As torch.fx: traced in train mode, only the softmax branch is in the graph.
  auto tr = trace("wrap_example_unwrapped", /*train=*/true);
  auto fns = targets(*tr.gm, Opcode::kCallFunction);
  EXPECT_TRUE(fns.count("aten::softmax.int"));
  EXPECT_FALSE(fns.count("aten::argmax"));
  EXPECT_TRUE(nodes_with(*tr.gm, Opcode::kCallMethod).empty());
  auto inputs = load_tensor_list(fixture("wrap_example_unwrapped.in.pt"));
  tr.gm->eval();  // still softmax: the branch was chosen when tracing
  at::NoGradGuard ng;
  EXPECT_EQ(tr.gm->forward(inputs).toTensor().scalar_type(), at::kFloat);

  auto ev = trace("wrap_example_unwrapped", /*train=*/false);
  auto efns = targets(*ev.gm, Opcode::kCallFunction);
  EXPECT_TRUE(efns.count("aten::argmax"));
  EXPECT_FALSE(efns.count("aten::softmax.int"));
  expect_matches_recording("wrap_example_unwrapped", false);
  expect_matches_recording("wrap_example_unwrapped", true);
}

TEST(Tracer, WrapFromOptionsEqualsWrapFromModel) {
  TracerOptions opts;
  opts.wrap.push_back(WrapSpec::parse("method:_post_process"));
  auto t = trace("wrap_example_unwrapped", false, opts);
  auto methods = nodes_with(*t.gm, Opcode::kCallMethod);
  ASSERT_EQ(methods.size(), 1u);
  EXPECT_EQ(methods[0]->target(), "_post_process");
  // And the model's own annotation can be switched off.
  TracerOptions off;
  off.use_model_annotations = false;
  auto u = trace("wrap_example", false, off);
  EXPECT_TRUE(nodes_with(*u.gm, Opcode::kCallMethod).empty());
}

TEST(Tracer, DataDependentBranchIsATraceErrorNamingLineAndFix) {
  const std::string msg = trace_error("data_dependent");
  EXPECT_NE(msg.find("code/__torch__.py:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("torch.sum(y)"), std::string::npos) << msg;  // the source line itself
  EXPECT_NE(msg.find("data-dependent"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DataDependentNet"), std::string::npos) << msg;
  EXPECT_NE(msg.find("wrap"), std::string::npos) << msg;
}

TEST(Tracer, CustomModuleKeptWholeByType) {
  const std::string msg = trace_error("custom_module");
  EXPECT_NE(msg.find("module 'head' (DecodeHead)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("module_type:DecodeHead"), std::string::npos) << msg;
  for (const char* spec : {"module_type:DecodeHead", "DecodeHead", "module:head"}) {
    SCOPED_TRACE(spec);
    TracerOptions opts;
    opts.wrap.push_back(WrapSpec::parse(spec));
    auto t = trace("custom_module", false, opts);
    EXPECT_TRUE(targets(*t.gm, Opcode::kCallModule).count("head"));
    EXPECT_FALSE(targets(*t.gm, Opcode::kCallModule).count("head.proj"));
    // The wrapped module's parameters belong to the GraphModule, shared.
    EXPECT_EQ(t.gm->get_attr("head.proj.weight").unsafeGetTensorImpl(),
              t.module.attr("head").toModule().attr("proj").toModule().attr("weight").toTensor().unsafeGetTensorImpl());
    expect_matches_recording("custom_module", false, opts);
  }
}

// A detector whose post-processing calls torchvision::nms: torchvision's operator
// library loads by itself, the post-processing is kept whole by type, and the
// traced graph gives PyTorch's outputs (a tuple of boxes and scores).
TEST(Tracer, TorchvisionOperatorsLoadByThemselves) {
  TracerOptions opts;
  opts.wrap.push_back(WrapSpec::parse("module_type:NmsPostProcess"));
  auto t = trace("detector_nms", false, opts);
  EXPECT_TRUE(targets(*t.gm, Opcode::kCallModule).count("post"));
  expect_matches_recording("detector_nms", false, opts);
  bool torchvision = false;
  for (const auto& l : qfx::fx::loaded_operator_libraries()) torchvision |= l.find("torchvision") != std::string::npos;
  EXPECT_TRUE(torchvision);
}

// An operator no library registers: one error naming it and the key to set.
TEST(LoadTorchScript, MissingOperatorNamesItAndTheKey) {
  try {
    load_torchscript(fixture("detector_missing_op.pt"));
    FAIL() << "loaded an archive calling qfx_missing::nms";
  } catch (const qfx::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("operator 'qfx_missing::nms'"), std::string::npos) << m;
    EXPECT_NE(m.find("model.libraries"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
  }
  EXPECT_THROW(qfx::fx::load_operator_library("/nonexistent/libops.so"), qfx::IoError);
}

// Dictionaries of traced values ({k: v}, keys / values / items, `in`) and in-place list
// operations (insert, pop, reverse), as torchvision's FPN and detection heads use them:
// traced through, and the graph computes what TorchScript computed.
TEST(Tracer, DictionariesAndListOperationsOfTracedValues) {
  auto t = trace("dict_list", false);
  EXPECT_TRUE(targets(*t.gm, Opcode::kCallFunction).count("aten::cat"));
  expect_matches_recording("dict_list", false);
}

TEST(Tracer, FunctionKeptWholeByName) {
  const std::string msg = trace_error("function_call");
  EXPECT_NE(msg.find("function:topk_decode"), std::string::npos) << msg;
  TracerOptions opts;
  opts.wrap.push_back(WrapSpec::parse("function:topk_decode"));
  auto t = trace("function_call", false, opts);
  EXPECT_TRUE(targets(*t.gm, Opcode::kCallFunction).count("topk_decode"));
  expect_matches_recording("function_call", false, opts);
}

TEST(Tracer, WrappedOperatorIsKeptEvenOnConstants) {
  TracerOptions opts;
  opts.wrap.push_back(WrapSpec::parse("aten::argmax"));
  auto t = trace("wrap_example_unwrapped", false, opts);
  EXPECT_TRUE(targets(*t.gm, Opcode::kCallFunction).count("aten::argmax"));
}

TEST(WrapSpec, ParsesKindsAndRejectsUnknown) {
  EXPECT_EQ(WrapSpec::parse("method:_post_process").kind, WrapSpec::Kind::kMethod);
  EXPECT_EQ(WrapSpec::parse("aten::argmax").kind, WrapSpec::Kind::kFunction);
  EXPECT_EQ(WrapSpec::parse("aten::argmax").name, "aten::argmax");
  EXPECT_EQ(WrapSpec::parse(" module_type : Head ").name, "Head");
  EXPECT_EQ(WrapSpec::parse("DecodeHead").kind, WrapSpec::Kind::kAny);
  EXPECT_EQ(WrapSpec::parse("module:a.b").str(), "module:a.b");
  EXPECT_THROW(WrapSpec::parse("klass:Foo"), qfx::ConfigError);
  EXPECT_THROW(WrapSpec::parse("method:"), qfx::ConfigError);
}

TEST(LoadTorchScript, BadFilesAreIoErrorsNamingThePath) {
  EXPECT_THROW(load_torchscript("/nonexistent/model.pt"), qfx::IoError);
  const std::string bogus = qfx::test::scratch_path() + "/not_a_model.pt";
  { std::ofstream(bogus) << "hello"; }
  try {
    load_torchscript(bogus);
    FAIL();
  } catch (const qfx::IoError& e) {
    EXPECT_NE(std::string(e.what()).find(bogus), std::string::npos);
  }
  // A truncated archive.
  std::ifstream src(fixture("wrap_example.pt"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  const std::string cut = qfx::test::scratch_path() + "/truncated.pt";
  { std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2); }
  EXPECT_THROW(load_torchscript(cut), qfx::IoError);
}

// Shape specialisation (TracerOptions::input_shapes): rank and static-size checks
// fold, their branches disappear, traced values carry meta["traced_shape"]; a branch
// on the dynamic batch stays an error naming the line; the batch stays dynamic in
// the traced graph (it runs at other batch sizes); no shapes: today's error.
TEST(Tracer, InputShapesFoldStaticShapeQueries) {
  torch::jit::Module m("ShapeNet");
  m.define(R"(
def forward(self, x):
    if x.dim() != 3:
        y = x + 0.5
    else:
        y = x
    n, t, c = y.shape
    x = y
    if c == 8:
        y = x * 2.0
    else:
        y = x - 1.0
    return y.reshape(n, t * c)
)");
  m.eval();
  TracerOptions opts;
  opts.input_shapes = {{-1, 4, 8}};
  auto gm = QuantizationTracer(opts).trace(m);
  std::set<std::string> targets;
  for (const Node* n : gm->graph().nodes()) targets.insert(n->target());
  EXPECT_TRUE(targets.count("aten::mul.Scalar") || targets.count("aten::mul.Tensor")) << "the c == 8 branch";
  EXPECT_FALSE(targets.count("aten::sub.Scalar") || targets.count("aten::sub.Tensor")) << "the other branch is gone";
  EXPECT_FALSE(targets.count("aten::dim")) << "dim() folded";
  bool shaped = false;
  for (const Node* n : gm->graph().nodes()) {
    auto it = n->meta().find("traced_shape");
    if (n->op() == Opcode::kPlaceholder || it == n->meta().end()) continue;
    if (it->second.toIntVector() == std::vector<int64_t>{-1, 32}) shaped = true;  // reshape(n, t * c): batch dynamic
  }
  EXPECT_TRUE(shaped);
  for (int64_t batch : {1, 5}) {  // the batch stays symbolic: the graph runs at any batch size
    const at::Tensor x = at::randn({batch, 4, 8});
    EXPECT_TRUE(at::allclose(gm->forward(x), (x * 2.0).reshape({batch, 32})));
  }

  torch::jit::Module b("BatchNet");
  b.define(R"(
def forward(self, x):
    if x.size(0) == 1:
        return x + 1.0
    return x
)");
  b.eval();
  try {
    QuantizationTracer(opts).trace(b);
    ADD_FAILURE() << "a branch on the dynamic batch must not fold";
  } catch (const qfx::TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic dimension"), std::string::npos) << e.what();
  }
  try {
    QuantizationTracer().trace(m);  // no input shapes: the rank check is data-dependent
    ADD_FAILURE() << "without input shapes the rank check cannot fold";
  } catch (const qfx::TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("give the input shape"), std::string::npos) << e.what();
  }
}

// An archive saved by torch 1.13 (committed; tools/fixtures/make_torch113_archive.py)
// traces in the libtorch qfx is built with, and the traced graph computes what 1.13
// computed: conv / batch norm / linear modules, the residual add, the shape branch folded.
TEST(Tracer, ArchiveSavedByTorch113TracesAndMatchesItsRecording) {
  const std::string dir = std::string(QFX_TEST_DATA_DIR) + "/torch1.13/";
  auto m = load_torchscript(dir + "small_cnn.pt");
  m.eval();
  TracerOptions opts;
  opts.input_shapes = {{-1, 3, 16, 16}};
  auto gm = QuantizationTracer(opts).trace(m);
  int convs = 0, bns = 0, linears = 0;
  for (const Node* n : gm->graph().nodes()) {
    if (n->op() != Opcode::kCallModule) continue;
    const std::string type = module_type_name(*n, *gm);
    convs += type == "Conv2d";
    bns += type == "BatchNorm2d";
    linears += type == "Linear";
  }
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(bns, 2);
  EXPECT_EQ(linears, 1);
  auto io = load_tensor_list(dir + "small_cnn.io.pt");
  ASSERT_EQ(io.size(), 2u);
  at::NoGradGuard ng;
  const at::Tensor got = gm->forward(io[0].toTensor());
  ASSERT_EQ(got.sizes(), io[1].toTensor().sizes());
  EXPECT_LE(rel_error(got, io[1].toTensor()), 1e-5);
}
