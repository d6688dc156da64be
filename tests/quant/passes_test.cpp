// fuse_fx, prepare_fx, prepare_qat_fx and statistics files, on C++ models traced
// with the JIT tracer and on the torchvision fixtures.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <ATen/ATen.h>

#include <filesystem>
#include <set>

#include "fx/fixtures.h"
#include "qfx/error.h"
#include "qfx/fx/tracer.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/op_names.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/passes.h"
#include "qfx/runtime/model.h"

using namespace qfx;
using namespace qfx::quant;

namespace {

// conv-bn-relu, a residual add, pools, a concat, a linear head and a sigmoid.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(8));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 3).padding(1)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(8));
    fc = register_module("fc", torch::nn::Linear(16 * 4 * 4, 10));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::relu(bn1->forward(conv1->forward(x)));
    at::Tensor z = torch::relu(bn2->forward(conv2->forward(y)) + y);
    at::Tensor c = torch::cat({torch::max_pool2d(z, 2), torch::avg_pool2d(z, 2)}, 1);
    return torch::sigmoid(fc->forward(c.flatten(1)));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// Gives batch norms non-trivial running statistics and affine parameters.
void randomize_bn(torch::nn::Module& m) {
  at::NoGradGuard ng;
  for (auto& b : m.named_buffers()) {
    if (b.key().find("running_mean") != std::string::npos) b.value().uniform_(-0.5, 0.5);
    if (b.key().find("running_var") != std::string::npos) b.value().uniform_(0.5, 2.0);
  }
  for (auto& p : m.named_parameters())
    if (p.key().find("bn") != std::string::npos) p.value().uniform_(0.5, 1.5);
}

std::shared_ptr<fx::GraphModule> traced_net(Net& net) {
  torch::manual_seed(0);
  net = Net();
  randomize_bn(*net);
  net->eval();
  return fx::trace_module(net.ptr(), [&](std::vector<c10::IValue> in) { return net->forward(in[0].toTensor()); },
                          {at::randn({2, 3, 8, 8})});
}

std::vector<fx::Node*> nodes_with_op(fx::GraphModule& gm, const std::string& op) {
  std::vector<fx::Node*> out;
  for (fx::Node* n : gm.graph().nodes())
    if (canonical_op_name(*n, gm) == op) out.push_back(n);
  return out;
}

// The FakeQuantize module a node's output is observed by ("" if none).
std::string observer_path(fx::Node* n) {
  for (fx::Node* u : n->users())
    if (u->meta().count("qfx_observer_of") && u->meta().at("qfx_observer_of").toStringRef() == n->name())
      return u->target();
  return "";
}

std::set<std::string> fake_quant_paths(fx::GraphModule& gm) {
  std::set<std::string> out;
  for (const auto& m : gm.named_modules("", false))
    if (dynamic_cast<FakeQuantize*>(m.value().get()) && m.key().rfind("activation_post_process", 0) == 0)
      out.insert(m.key());
  return out;
}


}  // namespace

TEST(FuseFx, ResNet18FusesEveryConvBnAndKeepsOutputs) {
  auto gm = fx::trace_file(test::fixture("resnet18_scripted.pt"));
  gm->eval();
  auto inputs = test::load_tensor_list(test::fixture("resnet18_scripted.in.pt"));
  at::NoGradGuard ng;
  at::Tensor before = gm->forward(inputs[0].toTensor());
  auto report = fuse_fx(*gm, BackendConfig::resolve("onednn"));
  at::Tensor after = gm->forward(inputs[0].toTensor());
  EXPECT_LE(test::rel_error(after, before), 1e-5);
  EXPECT_TRUE(nodes_with_op(*gm, "batchnorm2d").empty()) << "every conv+bn of resnet18 fuses";
  int relu_fused = 0, bn_only = 0;
  for (fx::Node* n : nodes_with_op(*gm, "conv2d")) {
    auto f = std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule(n->target()));
    ASSERT_TRUE(f) << n->name();
    relu_fused += f->activation() == FusedActivation::kReLU;
    bn_only += f->activation() == FusedActivation::kNone;
  }
  // stem + first conv of each of 8 blocks: conv-bn-relu; 8 second convs + 3 downsamples: conv-bn.
  EXPECT_EQ(relu_fused, 9);
  EXPECT_EQ(bn_only, 11);
  EXPECT_EQ(report.changes.size(), 20u);
  // The user's model is unchanged: the original TorchScript still gives its outputs.
  auto ref = test::load_tensor_list(test::fixture("resnet18_scripted.out_eval.pt"));
  auto fresh = fx::trace_file(test::fixture("resnet18_scripted.pt"));
  fresh->eval();
  EXPECT_LE(test::rel_error(fresh->forward(inputs[0].toTensor()), ref[0].toTensor()), 1e-5);
}

TEST(FuseFx, ConvWhoseOutputHasOtherUsersIsNotFused) {
  struct TwoUsersImpl : torch::nn::Module {
    TwoUsersImpl() {
      conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
      bn = register_module("bn", torch::nn::BatchNorm2d(4));
    }
    torch::nn::Conv2d conv{nullptr};
    torch::nn::BatchNorm2d bn{nullptr};
  };
  auto m = std::make_shared<TwoUsersImpl>();
  m->eval();
  auto fwd = [m](std::vector<c10::IValue> in) {
    at::Tensor y = m->conv->forward(in[0].toTensor());
    return c10::IValue(m->bn->forward(y) + y * 2);
  };
  at::Tensor x = at::randn({1, 3, 6, 6});
  auto gm = fx::trace_module(m, fwd, {x});
  auto report = fuse_fx(*gm, BackendConfig::resolve("onednn"));
  EXPECT_TRUE(report.changes.empty());
  ASSERT_EQ(report.declined.size(), 1u);
  EXPECT_NE(report.declined[0].find("2 users"), std::string::npos) << report.declined[0];
  EXPECT_EQ(nodes_with_op(*gm, "batchnorm2d").size(), 1u);
}

TEST(FuseFx, QatModeKeepsBatchNormAndSimulatesFolding) {
  Net net{nullptr};
  auto gm = traced_net(net);
  at::Tensor x = at::randn({4, 3, 8, 8});
  at::NoGradGuard ng;
  at::Tensor ref_eval = net->forward(x);
  fuse_fx(*gm, BackendConfig::resolve("onednn"), FuseOptions{/*qat=*/true});
  auto f = std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule("conv1"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->type_name(), "ConvBnReLU2d");
  gm->eval();
  EXPECT_LE(test::rel_error(gm->forward(x), ref_eval), 1e-5);
  // Train mode: batch statistics, same as the unfused model in train mode.
  net->train();
  at::Tensor ref_train = net->forward(x);
  gm->train();
  EXPECT_LE(test::rel_error(gm->forward(x), ref_train), 1e-4);
  // The parameters are the user's tensors (training the prepared model trains them).
  EXPECT_TRUE(f->named_parameters()["weight"].is_same(net->conv1->weight));
  EXPECT_TRUE(f->named_parameters()["bn.weight"].is_same(net->bn1->weight));
}

TEST(PrepareFx, OneDnnObserversShareAndFixWhereTheBackendSays) {
  Net net{nullptr};
  auto gm = traced_net(net);
  at::Tensor x = at::randn({4, 3, 8, 8});
  at::Tensor ref = net->forward(x).detach();
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  gm->graph().lint();
  // Weighted ops carry per-channel s8 weight fake quantizers.
  for (const char* name : {"conv1", "conv2", "fc"}) {
    auto f = std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule(name));
    ASSERT_TRUE(f && f->weight_fake_quant()) << name;
    EXPECT_TRUE(f->weight_fake_quant()->observer().spec().per_channel) << name;
    EXPECT_EQ(f->weight_fake_quant()->observer().spec().dtype, QDType::kInt8) << name;
  }
  auto relu = nodes_with_op(*gm, "relu");
  ASSERT_EQ(relu.size(), 1u) << "conv1's relu is fused; the one after the add is not";
  const std::string shared = observer_path(relu[0]);
  ASSERT_FALSE(shared.empty());
  for (const char* op : {"max_pool2d", "avg_pool2d", "cat", "flatten"}) {
    auto ns = nodes_with_op(*gm, op);
    ASSERT_EQ(ns.size(), 1u) << op;
    EXPECT_EQ(observer_path(ns[0]), shared) << op << " shares the relu's qparams";
  }
  auto sig = nodes_with_op(*gm, "sigmoid");
  ASSERT_EQ(sig.size(), 1u);
  auto sfq = std::dynamic_pointer_cast<FakeQuantize>(gm->get_submodule(observer_path(sig[0])));
  ASSERT_TRUE(sfq);
  EXPECT_TRUE(dynamic_cast<FixedQParamsObserver*>(&sfq->observer())) << "sigmoid has fixed qparams";
  // The add and its relu are onednn's [add, relu] fusion (torch.ao's add-relu
  // pattern): the add's output has no observer, the relu's observes the pair.
  auto add = nodes_with_op(*gm, "add");
  ASSERT_EQ(add.size(), 1u);
  EXPECT_EQ(observer_path(add[0]), "") << "no observer between an add and its fused relu";
  ASSERT_EQ(add[0]->users().size(), 1u);
  EXPECT_EQ(add[0]->users()[0], relu[0]);
  // input, conv1, conv2, relu (the add's too; + pools, cat, flatten), fc, sigmoid
  EXPECT_EQ(fake_quant_paths(*gm).size(), 6u);
  EXPECT_TRUE(float_fallbacks(*gm).empty());
  // Calibration state: outputs equal the float model's.
  at::NoGradGuard ng;
  at::Tensor cal = gm->forward(x);
  EXPECT_LE(test::rel_error(cal, ref), 1e-5);
  for (int i = 0; i < 4; ++i) gm->forward(at::randn({4, 3, 8, 8}));
  set_quant_state(*gm, QuantState::kFakeQuant);
  disable_observer(*gm);
  at::Tensor fq = gm->forward(x);
  EXPECT_FALSE(at::equal(fq, cal));
  EXPECT_GT(test::cosine(fq - 0.5, ref - 0.5), 0.99);
  auto q = sfq->qparams();
  EXPECT_FLOAT_EQ(q.scale.item<float>(), 1.0f / 256);
  EXPECT_EQ(q.zero_point.item<int>(), 0);
}

TEST(PrepareFx, FloatIslandsAndCustomAcceleratorConstraints) {
  Net net{nullptr};
  auto gm = traced_net(net);
  QConfigMapping m;
  m.set_module_name("fc", nullptr);
  BackendConfig acc = BackendConfig::resolve("example_accel");
  acc.ops["sigmoid"] = OpConfig{};  // float, as a target without a sigmoid unit
  acc.arithmetic.lut.clear();
  prepare_fx(*gm, m, acc);
  auto fb = float_fallbacks(*gm);
  bool fc_float = false, sigmoid_float = false;
  for (const auto& s : fb) {
    fc_float |= s.find("fc: qconfig is null (module_name:fc)") != std::string::npos;
    sigmoid_float |= s.find("runs sigmoid in float") != std::string::npos;
  }
  EXPECT_TRUE(fc_float) << "fallbacks:\n" << ::testing::PrintToString(fb);
  EXPECT_TRUE(sigmoid_float) << ::testing::PrintToString(fb);
  auto fc = nodes_with_op(*gm, "linear");
  ASSERT_EQ(fc.size(), 1u);
  EXPECT_EQ(observer_path(fc[0]), "") << "a float island is not observed";
  auto flat = nodes_with_op(*gm, "flatten");
  EXPECT_NE(observer_path(flat[0]), "") << "the value entering the island is (convert dequantizes there)";
  auto c2 = std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule("conv2"));
  ASSERT_TRUE(c2 && c2->weight_fake_quant());
  EXPECT_FALSE(c2->weight_fake_quant()->observer().spec().per_channel);
  at::NoGradGuard ng;
  for (int i = 0; i < 3; ++i) gm->forward(at::randn({4, 3, 8, 8}));
  for (const auto& p : fake_quant_paths(*gm)) {
    auto fq = std::dynamic_pointer_cast<FakeQuantize>(gm->get_submodule(p));
    auto q = fq->qparams();
    const float s = q.scale.item<float>();
    EXPECT_EQ(s, std::exp2(std::round(std::log2(s)))) << p << " scale " << s << " is not a power of two";
    EXPECT_EQ(q.zero_point.item<int>(), 0) << p << ": symmetric s8";
  }
  // Asking for per-channel weights on a per-tensor target is an error naming the node.
  Net net2{nullptr};
  auto gm2 = traced_net(net2);
  auto pc = std::make_shared<QConfig>();
  pc->weight.per_channel = true;
  QConfigMapping bad;
  bad.set_global(pc);
  try {
    prepare_fx(*gm2, bad, BackendConfig::resolve("example_accel"));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("conv1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("per-channel"), std::string::npos) << e.what();
  }
}

TEST(PrepareFx, StatisticsSaveLoadAndGraphHash) {
  Net net{nullptr};
  auto gm = traced_net(net);
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  at::NoGradGuard ng;
  for (int i = 0; i < 3; ++i) gm->forward(at::randn({4, 3, 8, 8}));
  const std::string path = (std::filesystem::path(qfx::test::scratch_path()) / "qfx_stats_test.pt").string();
  save_statistics(*gm, path);
  Net net2{nullptr};
  auto gm2 = traced_net(net2);
  prepare_fx(*gm2, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  EXPECT_EQ(graph_hash(*gm), graph_hash(*gm2));
  load_statistics(*gm2, path);
  for (const auto& p : fake_quant_paths(*gm)) {
    auto a = std::dynamic_pointer_cast<FakeQuantize>(gm->get_submodule(p))->qparams();
    auto b = std::dynamic_pointer_cast<FakeQuantize>(gm2->get_submodule(p))->qparams();
    EXPECT_TRUE(at::equal(a.scale, b.scale)) << p;
    EXPECT_TRUE(at::equal(a.zero_point, b.zero_point)) << p;
  }
  // A differently prepared graph refuses them.
  Net net3{nullptr};
  auto gm3 = traced_net(net3);
  QConfigMapping m;
  m.set_module_name("fc", nullptr);
  prepare_fx(*gm3, m, BackendConfig::resolve("onednn"));
  EXPECT_NE(graph_hash(*gm3), graph_hash(*gm));
  EXPECT_THROW(load_statistics(*gm3, path), DataError);
  EXPECT_THROW(load_statistics(*gm3, path + ".missing"), IoError);
  std::filesystem::remove(path);
}

TEST(PrepareQatFx, TrainsThroughFakeQuantAndConvBn) {
  Net net{nullptr};
  auto gm = traced_net(net);
  prepare_qat_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  EXPECT_TRUE(gm->is_training());
  auto f = std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule("conv1"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->type_name(), "ConvBnReLU2d");
  EXPECT_TRUE(f->weight_fake_quant()->fake_quant_enabled());
  at::Tensor x = at::randn({4, 3, 8, 8});
  at::Tensor y = gm->forward(x);
  y.sum().backward();
  int with_grad = 0, total = 0;
  for (const auto& p : gm->named_parameters()) {
    ++total;
    with_grad += p.value().grad().defined();
  }
  EXPECT_EQ(with_grad, total) << "every parameter gets a gradient through the STE";
  // freeze_bn_stats: the running statistics stop moving in train mode.
  freeze_bn_stats(*gm);
  at::Tensor rm = net->bn1->running_mean.clone();
  gm->forward(x);
  EXPECT_TRUE(at::equal(rm, net->bn1->running_mean));
  update_bn_stats(*gm);
  gm->forward(x);
  EXPECT_FALSE(at::equal(rm, net->bn1->running_mean));
}

TEST(FuseFx, EveryPatternFamilyFoldsExactly) {
  struct AllImpl : torch::nn::Module {
    AllImpl() {
      c1 = register_module("c1", torch::nn::Conv1d(torch::nn::Conv1dOptions(3, 4, 3)));
      b1 = register_module("b1", torch::nn::BatchNorm1d(4));
      c3 = register_module("c3", torch::nn::Conv3d(torch::nn::Conv3dOptions(2, 3, 3).padding(1)));
      b3 = register_module("b3", torch::nn::BatchNorm3d(3));
      ct = register_module("ct", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(3, 5, 3).stride(2)));
      bt = register_module("bt", torch::nn::BatchNorm2d(5));
      fc = register_module("fc", torch::nn::Linear(6, 7));
      bf = register_module("bf", torch::nn::BatchNorm1d(7));
      c6 = register_module("c6", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).groups(1)));
    }
    torch::nn::Conv1d c1{nullptr};
    torch::nn::BatchNorm1d b1{nullptr}, bf{nullptr};
    torch::nn::Conv3d c3{nullptr};
    torch::nn::BatchNorm3d b3{nullptr};
    torch::nn::ConvTranspose2d ct{nullptr};
    torch::nn::BatchNorm2d bt{nullptr};
    torch::nn::Linear fc{nullptr};
    torch::nn::Conv2d c6{nullptr};
  };
  torch::manual_seed(1);
  auto m = std::make_shared<AllImpl>();
  randomize_bn(*m);
  m->eval();
  auto fwd = [m](std::vector<c10::IValue> in) {
    auto a = torch::relu(m->b1->forward(m->c1->forward(in[0].toTensor())));
    auto b = m->b3->forward(m->c3->forward(in[1].toTensor()));
    auto c = m->bt->forward(m->ct->forward(in[2].toTensor()));
    auto d = m->bf->forward(m->fc->forward(in[3].toTensor()));
    auto e = torch::hardtanh(m->c6->forward(in[2].toTensor()), 0.0, 6.0);
    return c10::IValue(c10::ivalue::Tuple::create({a, b, c, d, e}));
  };
  std::vector<c10::IValue> in = {at::randn({2, 3, 9}), at::randn({1, 2, 4, 4, 4}), at::randn({2, 3, 5, 5}),
                                 at::randn({4, 6})};
  auto gm = fx::trace_module(m, fwd, in);
  at::NoGradGuard ng;
  auto before = gm->forward(in).toTupleRef().elements().vec();
  auto report = fuse_fx(*gm, BackendConfig::resolve("onednn"));
  auto after = gm->forward(in).toTupleRef().elements().vec();
  EXPECT_EQ(report.changes.size(), 5u) << ::testing::PrintToString(report.changes);
  for (const char* bn : {"batchnorm1d", "batchnorm2d", "batchnorm3d"})
    EXPECT_TRUE(nodes_with_op(*gm, bn).empty()) << bn;
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_LE(test::rel_error(after[i].toTensor(), before[i].toTensor()), 1e-5) << "output " << i;
  EXPECT_EQ(std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule("c1"))->type_name(), "ConvBnReLU1d");
  EXPECT_EQ(std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule("fc"))->type_name(), "LinearBn1d");
  EXPECT_EQ(std::dynamic_pointer_cast<FusedConvLinear>(gm->get_submodule("c6"))->type_name(), "ConvReLU6_2d");
}

// A detector's wrapped post-processing (torchvision's nms, a loop over the batch) goes
// to the host: the graph then returns the two heads' outputs, equal to the TorchScript
// model's own heads, and prepare_fx quantizes everything left.
TEST(SplitHostPostprocess, DetectorKeepsBackboneAndHeads) {
  fx::TracerOptions opts;
  opts.wrap.push_back(fx::WrapSpec::parse("module_type:DetectionPostProcess"));
  auto gm = fx::trace_file(test::fixture("detector_two_head.pt"), opts);
  gm->eval();
  const HostSplit split = split_host_postprocess(*gm);
  ASSERT_EQ(split.host_nodes.size(), 1u);
  EXPECT_NE(split.host_nodes[0].find("post: post (wrapped module DetectionPostProcess"), std::string::npos) << split.host_nodes[0];
  EXPECT_EQ(split.outputs, (std::vector<std::string>{"cls_head_3", "box_head"}));
  gm->recompile();
  at::Tensor x = at::randn({2, 3, 32, 32});
  auto out = gm->forward({c10::IValue(x)}).toTuple()->elements();
  ASSERT_EQ(out.size(), 2u);
  auto script = fx::load_torchscript(test::fixture("detector_two_head.pt"));
  script.eval();
  at::Tensor f = script.attr("backbone").toModule().forward({x}).toTensor();
  EXPECT_LT(test::rel_error(out[0].toTensor(), script.attr("cls_head").toModule().forward({f}).toTensor()), 1e-5);
  EXPECT_LT(test::rel_error(out[1].toTensor(), script.attr("box_head").toModule().forward({f}).toTensor()), 1e-5);
  prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve("onednn"));
  EXPECT_TRUE(float_fallbacks(*gm).empty());
  // A model with nothing to split is left unchanged.
  auto plain = fx::trace_file(test::fixture("resnet18_scripted.pt"));
  const size_t n = plain->graph().size();
  EXPECT_TRUE(split_host_postprocess(*plain).empty());
  EXPECT_EQ(plain->graph().size(), n);
}

// export_onnx carries the arithmetic of the target prepare_fx was given (as qfx ptq
// writes it), unless the caller says otherwise.
TEST(ExportOnnx, CarriesTheTargetArithmeticByDefault) {
  auto exported_arithmetic = [](const std::string& backend, bool target_arithmetic) {
    Net net{nullptr};
    auto gm = traced_net(net);
    prepare_fx(*gm, QConfigMapping::default_mapping(), BackendConfig::resolve(backend));
    at::NoGradGuard ng;
    for (int i = 0; i < 3; ++i) gm->forward(at::randn({4, 3, 8, 8}));
    auto converted = convert_fx(*gm);
    ExportOptions eo;
    eo.input_shapes = {{-1, 3, 8, 8}};
    eo.target_arithmetic = target_arithmetic;
    const std::string bytes = export_onnx_bytes(*converted, eo, nullptr);
    return runtime::Model::load_from_string(bytes, {"reference"}).arithmetic();
  };
  const runtime::Arithmetic tfl = BackendConfig::resolve("tflite_like").arithmetic;
  const runtime::Arithmetic got = exported_arithmetic("tflite_like", true);
  EXPECT_EQ(got.to_json(), tfl.to_json());
  EXPECT_EQ(got.requantize, runtime::RequantMode::kFixedPoint);
  EXPECT_TRUE(got.average_pool_divide);
  EXPECT_TRUE(exported_arithmetic("tflite_like", false).is_float()) << "target_arithmetic = false: ONNX's arithmetic";
  EXPECT_TRUE(exported_arithmetic("onednn", true).is_float()) << "a target of ONNX's arithmetic records none";
}
