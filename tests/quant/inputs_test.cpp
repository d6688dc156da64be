// Several and integer model inputs: the runtime's Gather / Cast / ReduceSum against
// libtorch, per-input datasets read in step, and the softmax-input observer.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <random>

#include "../../backends/src/kernels.h"
#include "../common/scratch_dir.h"
#include "qfx/error.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/observer.h"
#include "qfx/quant/runtime_tensor.h"
#include "qfx/runtime/npy.h"

namespace fs = std::filesystem;
using namespace qfx::runtime;

namespace {

ir::Node node(const std::string& op, std::vector<std::string> ins) {
  ir::Node n;
  n.op = op;
  n.name = op;
  n.inputs = std::move(ins);
  n.outputs = {"y"};
  return n;
}

// One kernel run on ATen tensors, the output back as ATen.
at::Tensor run(const ir::Node& n, const std::vector<at::Tensor>& xs) {
  std::vector<Meta> metas;
  std::vector<Tensor> ins;
  for (const auto& x : xs) {
    ins.push_back(qfx::quant::runtime_view(x));
    metas.push_back({ins.back().shape(), ins.back().dtype()});
  }
  Kernel k = make_kernel(n, metas, {}, "reference");
  Tensor y(k.outputs[0].shape, k.outputs[0].dtype);
  std::vector<const Tensor*> in;
  for (const auto& t : ins) in.push_back(&t);
  k.run(in, {&y});
  const at::ScalarType st = y.dtype() == DType::kFloat32 ? at::kFloat : y.dtype() == DType::kInt64 ? at::kLong
                            : y.dtype() == DType::kInt32 ? at::kInt : at::kBool;
  return at::from_blob(y.raw(), y.shape(), st).clone();
}

ir::Attr int_attr(int64_t v) {
  ir::Attr a;
  a.kind = ir::Attr::Kind::kInt;
  a.i = v;
  return a;
}

fs::path scratch(const std::string& name) {
  fs::path p = fs::path(qfx::test::scratch_path()) / ("qfx_inputs_test_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void save(const fs::path& p, const at::Tensor& t) {
  const DType dt = t.scalar_type() == at::kLong ? DType::kInt64 : DType::kFloat32;
  Tensor r(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), dt);
  std::memcpy(r.raw(), t.contiguous().data_ptr(), r.nbytes());
  save_npy(p.string(), r);
}

}  // namespace

TEST(IntegerInputs, GatherEqualsEmbeddingAndIndexSelect) {
  at::manual_seed(3);
  const at::Tensor table = at::randn({50, 8}), ids = at::randint(-50, 50, {3, 7}, at::kLong);
  ir::Node g = node("Gather", {"t", "i"});
  EXPECT_TRUE(at::equal(run(g, {table, ids}), at::embedding(table, at::remainder(ids, 50))));  // negative: from the end
  const at::Tensor x = at::randn({4, 6, 5}), idx = at::tensor({5, 0, 2, 2}, at::kLong);
  g.attrs["axis"] = int_attr(1);
  EXPECT_TRUE(at::equal(run(g, {x, idx}), at::index_select(x, 1, idx)));
  EXPECT_TRUE(at::equal(run(g, {x, idx.to(at::kInt)}), at::index_select(x, 1, idx)));
  EXPECT_THROW(run(node("Gather", {"t", "i"}), {table, at::tensor({50}, at::kLong)}), qfx::DataError);
  EXPECT_THROW(run(node("Gather", {"t", "i"}), {table, at::tensor({1.0f})}), qfx::UnsupportedOpError);
}

TEST(IntegerInputs, CastAndReduceSumEqualLibtorch) {
  const at::Tensor mask = at::tensor({1, 1, 0, 1, 0, 0}, at::kLong).reshape({2, 3});
  ir::Node c = node("Cast", {"m"});
  c.attrs["to"] = int_attr(1);  // FLOAT
  EXPECT_TRUE(at::equal(run(c, {mask}), mask.to(at::kFloat)));
  c.attrs["to"] = int_attr(7);  // INT64: float to int truncates toward zero
  EXPECT_TRUE(at::equal(run(c, {at::tensor({-2.7f, 2.7f, 0.0f})}), at::tensor({-2, 2, 0}, at::kLong)));
  c.attrs["to"] = int_attr(9);  // BOOL
  EXPECT_TRUE(at::equal(run(c, {mask}), mask.to(at::kBool)));
  c.attrs["to"] = int_attr(10);  // FLOAT16: not supported, said so
  EXPECT_THROW(run(c, {mask}), qfx::UnsupportedOpError);
  const at::Tensor x = at::randn({2, 5, 3});
  ir::Node s = node("ReduceSum", {"x", "axes"});
  Tensor axes({1}, DType::kInt64);
  axes.data<int64_t>()[0] = 1;
  s.attrs["keepdims"] = int_attr(0);
  Kernel k = make_kernel(s, {{{2, 5, 3}, DType::kFloat32}, {{1}, DType::kInt64}}, {nullptr, &axes}, "reference");
  Tensor in = qfx::quant::runtime_view(x), y(k.outputs[0].shape, DType::kFloat32);
  k.run({&in, &axes}, {&y});
  EXPECT_TRUE(at::allclose(qfx::quant::aten_view(y), x.sum(1), 1e-6, 1e-6));
}

TEST(IntegerInputs, PerInputSourcesReadInStepWithTheirDtypes) {
  const fs::path d = scratch("step");
  const at::Tensor ids = at::arange(40, at::kLong).reshape({10, 4}), mask = (ids % 3).gt(0).to(at::kLong);
  save(d / "ids.npy", ids);
  save(d / "mask.npy", mask);
  using qfx::quant::DataSpec;
  DataSpec spec;
  for (const char* name : {"ids", "mask"}) {
    DataSpec s;
    s.format = "npy";
    s.images = (d / (std::string(name) + ".npy")).string();
    s.input = name;
    spec.inputs.push_back(s);
  }
  const std::vector<qfx::quant::InputSpec> inputs = {{"ids", {-1, 4}, "int64"}, {"mask", {-1, 4}, "int64"}};
  auto data = qfx::quant::open_inputs(spec, inputs, 6, 7);  // 6 of 10 samples, seeded: the same 6 in both
  ASSERT_EQ(data->num_inputs(), 2u);
  ASSERT_EQ(data->size(), 6);
  const auto b = data->batch_inputs(0, 6);
  ASSERT_EQ(b[0].scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(b[1], (b[0] % 3).gt(0).to(at::kLong)));  // rows belong together
  EXPECT_THROW(data->batch(0, 1), qfx::ConfigError);               // one-input steps refuse it
  // Sources of different lengths, a missing source, float data for an int64 input.
  save(d / "short.npy", mask.slice(0, 0, 9));
  spec.inputs[1].images = (d / "short.npy").string();
  EXPECT_THROW(qfx::quant::open_inputs(spec, inputs), qfx::DataError);
  spec.inputs.pop_back();
  EXPECT_THROW(qfx::quant::open_inputs(spec, inputs), qfx::ConfigError);
  save(d / "f.npy", at::zeros({10, 4}));
  spec.inputs[0].images = (d / "f.npy").string();
  EXPECT_THROW(qfx::quant::open_inputs(spec, {inputs[0]}), qfx::DataError);
}

// An additive attention mask (-10000 on padded keys) must not stretch the range the
// scores share: the softmax-input observer sees max(x, rowmax - 20).
TEST(IntegerInputs, SoftmaxInputObserverIgnoresTheMask) {
  at::manual_seed(5);
  at::Tensor scores = at::randn({4, 2, 6, 6}) * 3;
  scores.slice(3, 4, 6).fill_(-10000.0);
  auto make = [] {
    qfx::quant::ObserverSpec s;
    return std::make_shared<qfx::quant::FakeQuantize>(qfx::quant::make_observer(s));
  };
  auto plain = make(), marked = make();
  marked->set_softmax_dim(-1);
  plain->set_state(qfx::quant::QuantState::kCalibration);
  marked->set_state(qfx::quant::QuantState::kCalibration);
  plain->forward(scores);
  marked->forward(scores);
  const double lo = scores.slice(3, 0, 4).amax(-1).min().item<double>() - qfx::quant::FakeQuantize::kSoftmaxSpan;
  EXPECT_LT(plain->observer().min_max().first.item<double>(), -9999.0);
  EXPECT_NEAR(marked->observer().min_max().first.item<double>(), lo, 1e-4);
  EXPECT_NEAR(marked->observer().min_max().second.item<double>(), scores.max().item<double>(), 1e-6);
  // What the softmax gives from the fake-quantized scores stays close to float's.
  marked->set_state(qfx::quant::QuantState::kFakeQuant);
  const at::Tensor p = at::softmax(scores, -1), q = at::softmax(marked->forward(scores), -1);
  EXPECT_LT((p - q).abs().max().item<double>(), 0.05);
}

// A registered reader of integer samples (dtype_ kLong, read_typed) feeds an int64 input.
TEST(IntegerInputs, RegisteredReaderGivesInt64Samples) {
  class CountingIds : public qfx::quant::Dataset {
   public:
    explicit CountingIds(int64_t n) {
      sample_shape_ = {3};
      dtype_ = at::kLong;
      source_ = "counting_ids";
      select(n, 0, -1);
    }

   protected:
    void read(int64_t, float*) override { FAIL() << "an int64 reader is read with read_typed"; }
    void read_typed(int64_t id, void* dst) override {
      for (int64_t i = 0; i < 3; ++i) static_cast<int64_t*>(dst)[i] = 10 * id + i;
    }
  };
  qfx::quant::register_data_reader("counting_ids", [](const qfx::quant::DataSpec&, const std::vector<int64_t>&, int64_t,
                                                      int64_t) { return std::make_unique<CountingIds>(5); });
  qfx::quant::DataSpec spec;
  spec.format = "counting_ids";
  auto data = qfx::quant::open_inputs(spec, {{"ids", {-1, 3}, "int64"}});
  const at::Tensor b = data->batch(1, 3);
  ASSERT_EQ(b.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(b, at::tensor({10, 11, 12, 20, 21, 22}, at::kLong).reshape({2, 3})));
  EXPECT_THROW(qfx::quant::open_inputs(spec, {{"x", {-1, 3}, "float32"}}), qfx::DataError);  // integers for a float input
}
