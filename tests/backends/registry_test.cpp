// The kernel registry: implementation order and declines, backends registered in a
// program and from the example plug-in (outputs equal to the reference), the
// kernel report, and the errors of unknown backends and bad plug-ins.
#include <gtest/gtest.h>

#include "../../backends/src/kernels.h"

#include "../common/scratch_dir.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "qfx/error.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/npy.h"
#include "qfx/runtime/registry.h"

using namespace qfx::runtime;

namespace {

std::string onnx_dir() { return std::string(QFX_FIXTURE_DIR) + "/onnx/"; }

Tensor random_input(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  Tensor x({n, 3, 16, 16}, DType::kFloat32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
  return x;
}

Tensor run1(const Model& m, const Tensor& x) { return m.run({{m.inputs()[0].name, x}}).begin()->second; }

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// Not on a temporary report: the pointer would dangle (found by ASan).
const KernelChoice* choice_for_op(std::vector<KernelChoice>&& r, const std::string& op) = delete;
const KernelChoice* choice_for_op(const std::vector<KernelChoice>& r, const std::string& op) {
  for (const auto& c : r)
    if (c.op == op) return &c;
  return nullptr;
}

}  // namespace

TEST(Registry, BuiltInBackendsAndChains) {
  auto names = backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "onednn"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "reference"), names.end());
  EXPECT_EQ(backend_chain("onednn"), (std::vector<std::string>{"onednn", "reference"}));
  EXPECT_EQ(backend_chain("reference"), (std::vector<std::string>{"reference"}));
}

TEST(Registry, ProgramBackendOverridesOneOpAndInheritsTheRest) {
  // A backend whose float Add declines broadcasting and otherwise runs its own loop
  // (residual additions, with the ReLU after them fused).
  register_backend({"test_add_backend", "reference", "test", {}});
  int built = 0;
  register_kernel("test_add_backend", "Add", "test_add", [&built](const KernelRequest& r, Kernel* k) {
    if (r.in.size() != 2 || r.in[0].shape != r.in[1].shape) return r.decline("no broadcasting");
    if (!r.node.fused_act.empty() && r.node.fused_act != "Relu") return r.decline("Relu only");
    ++built;
    const float lo = r.node.fused_act == "Relu" ? 0.0f : -INFINITY;
    k->outputs = {{r.in[0].shape, DType::kFloat32}};
    k->run = [lo](const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
      const float *a = in[0]->data<float>(), *b = in[1]->data<float>();
      for (int64_t i = 0; i < in[0]->numel(); ++i) out[0]->data<float>()[i] = std::max(a[i] + b[i], lo);
    };
    return true;
  });
  Tensor x = load_npy(onnx_dir() + "resnet18.in.npy");
  Model ref = Model::load(onnx_dir() + "resnet18.onnx", {"reference"});
  Model m = Model::load(onnx_dir() + "resnet18.onnx", {"test_add_backend"});
  auto report = m.kernel_report();
  const KernelChoice* add = choice_for_op(report, "Add");
  ASSERT_NE(add, nullptr) << "resnet18 has residual additions";
  EXPECT_EQ(add->impl, "test_add");
  EXPECT_EQ(add->backend, "test_add_backend");
  const KernelChoice* conv = choice_for_op(report, "Conv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->impl, "reference");
  EXPECT_EQ(conv->backend, "reference");
  EXPECT_EQ(built, 8) << "resnet18's eight residual additions";
  EXPECT_TRUE(bit_equal(run1(ref, x), run1(m, x))) << "the test Add computes what the reference does";
}

// A kernel that accepts a node but gives no run function (or no outputs) is refused
// when the plan is built, naming node and kernel: its outputs would be uninitialised.
TEST(Registry, AcceptingWithoutARunFunctionIsRefused) {
  register_backend({"test_lazy_backend", "reference", "test", {}});
  register_kernel("test_lazy_backend", "Add", "lazy_add", [](const KernelRequest& r, Kernel* k) {
    k->outputs = {{r.in[0].shape, DType::kFloat32}};
    return true;  // accepts, and never says how to compute
  });
  try {
    Model::load(onnx_dir() + "resnet18.onnx", {"test_lazy_backend"});
    FAIL() << "expected UnsupportedOpError";
  } catch (const qfx::UnsupportedOpError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'lazy_add' of backend 'test_lazy_backend' accepted the node but gave no run function"),
              std::string::npos) << e.what();
  }
}

TEST(Registry, DeclinesAreReportedWithTheirReasons) {
  // Without VNNI oneDNN declines int8 convolutions whose weights exceed 7 bits; the
  // report must say so. With VNNI it runs them: either way, the report tells.
  Model m = Model::load(onnx_dir() + "qdq_s8.onnx", {"onednn"});
  int convs = 0;
  for (const auto& c : m.kernel_report()) {
    if (c.op != "QLinearConv") continue;
    ++convs;
    if (c.impl == "onednn") {
      EXPECT_TRUE(c.declined.empty());
    } else {
      ASSERT_FALSE(c.declined.empty()) << c.node << " ran on " << c.impl << " with no decline recorded";
      EXPECT_EQ(c.declined[0].impl, "onednn");
      EXPECT_FALSE(c.declined[0].reason.empty());
    }
  }
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(kernel_counts(m.kernel_report()), m.kernel_impls());
}

TEST(Registry, OneDnnRunsTheInt8ConvolutionsItIsExpectedTo) {
  // qdq_convnet has u8 activations and 8-bit weights (+-127): oneDNN must run every
  // QLinearConv and the QGemm where it is exact (a CPU with VNNI), and otherwise
  // decline them with the reason (without VNNI u8 x s8 pair sums saturate in int16
  // beyond 7-bit weights); never a silent reference fallback.
  Model m = Model::load(onnx_dir() + "qdq_convnet.onnx", {"onednn"});
  Tensor eight_bit({2}, DType::kInt8);
  eight_bit.data<int8_t>()[0] = -127;
  eight_bit.data<int8_t>()[1] = 127;
  const bool exact = onednn_int8_exact(DType::kUInt8, eight_bit);  // true exactly with VNNI
  int convs = 0;
  for (const auto& c : m.kernel_report()) {
    if (c.op == "QLinearConv" || c.op == "QGemm") {
      ++convs;
      std::string why;
      for (const auto& d : c.declined) why += d.impl + ": " + d.reason + "; ";
      if (exact) {
        EXPECT_EQ(c.impl, "onednn") << c.node << " (" << c.op << ") declined: " << why;
      } else {
        EXPECT_EQ(c.impl, "reference") << c.node;
        EXPECT_NE(why.find("onednn: weights beyond +-64 without VNNI"), std::string::npos) << c.node << ": " << why;
      }
    }
    if (c.op == "QLinearAdd") EXPECT_EQ(c.impl, "simd") << c.node;
  }
  EXPECT_EQ(convs, 3);
}

TEST(Registry, ExamplePluginRunsItsKernelAndEqualsTheReference) {
  load_plugin(QFX_EXAMPLE_PLUGIN);
  load_plugin(QFX_EXAMPLE_PLUGIN);  // a second load is a no-op
  ASSERT_TRUE(has_backend("example_npu"));
  EXPECT_EQ(backend_chain("example_npu"), (std::vector<std::string>{"example_npu", "reference"}));
  Model ref = Model::load(onnx_dir() + "qdq_convnet.onnx", {"reference"});
  ModelOptions o("example_npu");
  o.plugins = {QFX_EXAMPLE_PLUGIN};
  Model npu = Model::load(onnx_dir() + "qdq_convnet.onnx", o);
  const auto npu_report = npu.kernel_report();  // by value: keep it alive
  const KernelChoice* add = choice_for_op(npu_report, "QLinearAdd");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->impl, "example_npu");
  const KernelChoice* conv = choice_for_op(npu_report, "QLinearConv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->impl, "reference") << "ops the plug-in does not register are inherited";
  for (uint32_t seed = 0; seed < 5; ++seed) {
    Tensor x = random_input(4, seed);
    EXPECT_TRUE(bit_equal(run1(ref, x), run1(npu, x))) << "seed " << seed;
  }
}

TEST(Registry, UnknownBackendsAndBadPluginsAreClearErrors) {
  try {
    Model::load(onnx_dir() + "qdq_convnet.onnx", {"no_such_backend"});
    FAIL() << "no error";
  } catch (const qfx::ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("no_such_backend"), std::string::npos) << w;
    EXPECT_NE(w.find("onednn"), std::string::npos) << "names the registered backends: " << w;
  }
  EXPECT_THROW(load_plugin("/nonexistent/libnothing.so"), qfx::IoError);
  // A file that is not a shared library.
  const auto bad = std::filesystem::path(qfx::test::scratch_path()) / ("qfx_not_a_plugin_" + std::to_string(::getpid()) + ".so");
  std::ofstream(bad) << "not an ELF file";
  try {
    load_plugin(bad.string());
    FAIL() << "no error";
  } catch (const qfx::IoError& e) {
    EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
  }
  std::filesystem::remove(bad);
  EXPECT_THROW(register_kernel("no_such_backend", "Relu", "x", [](const KernelRequest&, Kernel*) { return false; }),
               qfx::ConfigError);
  EXPECT_THROW(register_backend({"orphan", "no_such_parent", "", {}}), qfx::ConfigError);
}
