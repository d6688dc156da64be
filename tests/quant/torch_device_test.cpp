// Training on a libtorch device, the parts a machine without a GPU proves: which
// devices a config may name, loading libtorch's CUDA library (its kernels registered
// in ATen's dispatcher), and the observers' device path (ATen reductions where the
// tensor lives), which must give the host path's statistics and errors exactly.
#include <gtest/gtest.h>
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <functional>
#include <memory>
#include <string>

#include "qfx/error.h"
#include "qfx/quant/observer.h"
#include "qfx/quant/torch_device.h"

using namespace qfx;
using namespace qfx::quant;

namespace {

bool aten_has_cuda_add() {
  const auto op = c10::Dispatcher::singleton().findSchema({"aten::add", "Tensor"});
  return op.has_value() && op->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
}

// Feeds the same batches to two observers made by `make`, one through forward() (the
// host path) and one through observe_on_device(); their statistics must be equal.
void expect_same_statistics(const std::function<std::shared_ptr<ObserverBase>()>& make, const std::string& what) {
  auto host = make(), device = make();
  at::manual_seed(7);
  for (int b = 0; b < 4; ++b) {
    const at::Tensor x = at::randn({3, 5, 4, 6}) * (b + 1) + b;
    host->forward(x);
    device->observe_on_device(x);
  }
  const auto [hl, hh] = host->min_max();
  const auto [dl, dh] = device->min_max();
  EXPECT_TRUE(at::equal(hl, dl)) << what << ": min " << hl << " vs " << dl;
  EXPECT_TRUE(at::equal(hh, dh)) << what << ": max " << hh << " vs " << dh;
  if (auto* h = dynamic_cast<HistogramObserver*>(host.get())) {
    const Histogram a = h->histogram(), b = dynamic_cast<HistogramObserver&>(*device).histogram();
    EXPECT_EQ(a.counts, b.counts) << what;
    EXPECT_TRUE(a.lo == b.lo && a.width == b.width && a.min == b.min && a.max == b.max) << what;
  }
  const QParams qh = host->calculate_qparams(), qd = device->calculate_qparams();
  EXPECT_TRUE(at::equal(qh.scale, qd.scale) && at::equal(qh.zero_point, qd.zero_point)) << what;
}

QuantSpec per_channel(int64_t axis) {
  QuantSpec s = QuantSpec::make(QDType::kInt8, QScheme::kSymmetric);
  s.per_channel = true;
  s.ch_axis = axis;
  return s;
}

// The message of the DataError `f` throws ("" if none).
std::string data_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TorchDevice, ParsesTheDevicesAConfigMayName) {
  EXPECT_TRUE(parse_torch_device("cpu", "training.device").is_cpu());
  EXPECT_TRUE(parse_torch_device("cuda", "training.device").is_cuda());
  const c10::Device d = parse_torch_device("cuda:3", "training.device");
  EXPECT_TRUE(d.is_cuda() && d.index() == 3);
  for (const char* bad : {"gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cuda:12345", "cpu:0", "mps", ""}) {
    try {
      parse_torch_device(bad, "training.device");
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("training.device must be cpu, cuda or cuda:N, got '" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(TorchDevice, TheCpuIsAlwaysAvailable) { EXPECT_EQ(torch_device_unavailable_reason(c10::Device(c10::kCPU)), ""); }

// The torch wheel carries libtorch_cuda.so (CMake saw it beside libtorch_cpu); Debian's
// libtorch 1.13 does not.
TEST(TorchDevice, LoadsLibtorchsCudaKernelsWhereLibtorchHasThem) {
  ASSERT_FALSE(aten_has_cuda_add()) << "qfx links libtorch's CPU libraries only";
  const std::string why = torch_device_unavailable_reason(c10::Device(c10::kCUDA));
  if (QFX_TORCH_HAS_CUDA_LIB) {
    EXPECT_TRUE(aten_has_cuda_add()) << why;
    EXPECT_TRUE(torch_cuda_kernels_loaded());
    // A device, or the reason there is none.
    if (!why.empty()) EXPECT_NE(why.find("libtorch sees no CUDA device"), std::string::npos) << why;
    if (why.empty()) EXPECT_EQ(torch_device_unavailable_reason(c10::Device("cuda:4096")).find("libtorch sees "), 0u);
  } else {
    EXPECT_NE(why.find("is a CPU-only build (it has no libtorch_cuda.so)"), std::string::npos) << why;
    EXPECT_FALSE(aten_has_cuda_add());
    EXPECT_FALSE(torch_cuda_kernels_loaded());
  }
}

TEST(ObserverOnDevice, StatisticsEqualTheHostPath) {
  const QuantSpec u8 = QuantSpec::make(QDType::kUInt8, QScheme::kAffine);
  expect_same_statistics([&] { return std::make_shared<MinMaxObserver>(u8); }, "minmax");
  expect_same_statistics([&] { return std::make_shared<MovingAverageMinMaxObserver>(u8, 0.1); }, "moving average");
  for (int64_t axis : {0, 1, 3, -1}) {
    const std::string a = " axis " + std::to_string(axis);
    expect_same_statistics([&] { return std::make_shared<PerChannelMinMaxObserver>(per_channel(axis)); }, "per-channel" + a);
    expect_same_statistics([&] { return std::make_shared<MovingAveragePerChannelMinMaxObserver>(per_channel(axis), 0.2); },
                           "moving average per-channel" + a);
  }
  expect_same_statistics([&] { return std::make_shared<HistogramObserver>(u8, Algorithm::kEntropy, AlgorithmOptions{}, 256); },
                         "histogram");
  // Observers do not move: their statistics stay on the host.
  MinMaxObserver o(u8);
  o.to(c10::Device(c10::kCPU));
  EXPECT_TRUE(o.min_max().first.device().is_cpu());
}

TEST(ObserverOnDevice, RefusesNaNAndInfAsTheHostPathDoes) {
  const QuantSpec u8 = QuantSpec::make(QDType::kUInt8, QScheme::kAffine);
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    at::Tensor x = at::randn({2, 3, 4, 4});
    x.index_put_({1, 2, 3, 0}, bad);
    MinMaxObserver a(u8), b(u8);
    a.set_tensor_name("conv1");
    b.set_tensor_name("conv1");
    const std::string host = data_error([&] { a.forward(x); });
    EXPECT_NE(host.find("observed tensor 'conv1' contains NaN or Inf"), std::string::npos) << host;
    EXPECT_EQ(data_error([&] { b.observe_on_device(x); }), host);
    PerChannelMinMaxObserver c(per_channel(1)), d(per_channel(1));
    c.set_tensor_name("conv1");
    d.set_tensor_name("conv1");
    EXPECT_EQ(data_error([&] { d.observe_on_device(x); }), data_error([&] { c.forward(x); }));
    EXPECT_FALSE(d.has_data());
  }
  PerChannelMinMaxObserver c(per_channel(4)), d(per_channel(4));
  const at::Tensor x = at::randn({2, 3});
  const std::string host = data_error([&] { c.forward(x); });
  EXPECT_NE(host.find("channel axis 4 out of range for a tensor of rank 2"), std::string::npos) << host;
  EXPECT_EQ(data_error([&] { d.observe_on_device(x); }), host);
}
