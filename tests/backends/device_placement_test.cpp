// The planner's device placement (BackendInfo::device_alloc, Kernel::device_io), proven
// on the CPU with a fake device: a backend whose "device memory" is tracked host
// memory and whose kernels are the reference kernels behind a check that every value
// arrives where the planner said (device arena or host), so the CUDA backend's
// residency rules are tested without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "../../backends/src/kernels.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/registry.h"

using namespace qfx::runtime;

namespace {

struct FakeDevice {
  std::mutex mu;
  std::vector<std::pair<const uint8_t*, size_t>> blocks;  // live allocations
  int copies_to_host = 0;
  int misplaced = 0;  // values a kernel found elsewhere than the planner said
  int device_reads = 0;
  bool contains(const void* p) {
    std::lock_guard<std::mutex> lk(mu);
    const auto* b = static_cast<const uint8_t*>(p);
    for (const auto& [base, n] : blocks)
      if (b >= base && b < base + n) return true;
    return false;
  }
};

FakeDevice& fake() {
  static FakeDevice d;
  return d;
}

// Every op but MaxPool: that one stays on the CPU, so the values around it must too.
bool fake_kernel(const KernelRequest& r, Kernel* k) {
  if (r.node.op == "MaxPool") return r.decline("not on the fake device");
  *k = make_kernel(r.node, r.in, r.consts, "reference");
  auto where = std::make_shared<std::pair<std::vector<bool>, std::vector<bool>>>();
  where->first.assign(r.in.size(), false);
  where->second.assign(k->outputs.size(), false);
  k->device_io = true;
  k->place = [where](const std::vector<bool>& in, const std::vector<bool>& out) { *where = {in, out}; };
  k->run = [inner = k->run, where](const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
    FakeDevice& d = fake();
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i]) {
        const bool dev = d.contains(in[i]->raw());
        d.misplaced += dev != (i < where->first.size() && where->first[i]);
        d.device_reads += dev;
      }
    for (size_t o = 0; o < out.size(); ++o)
      if (out[o]) d.misplaced += d.contains(out[o]->raw()) != (o < where->second.size() && where->second[o]);
    inner(in, out);
  };
  return true;
}

void register_fake_device() {
  static std::once_flag once;
  std::call_once(once, [] {
    BackendInfo info;
    info.name = "fakedev";
    info.parent = "reference";
    info.description = "tracked host memory standing in for a device (tests)";
    info.device_alloc = [](size_t bytes) {
      auto* p = new uint8_t[bytes];
      {
        std::lock_guard<std::mutex> lk(fake().mu);
        fake().blocks.push_back({p, bytes});
      }
      return std::shared_ptr<uint8_t[]>(p, [](uint8_t* q) {
        std::lock_guard<std::mutex> lk(fake().mu);
        auto& b = fake().blocks;
        b.erase(std::remove_if(b.begin(), b.end(), [q](const auto& e) { return e.first == q; }), b.end());
        delete[] q;
      });
    };
    info.device_to_host = [](void* host, const void* device, size_t bytes) {
      ++fake().copies_to_host;
      std::memcpy(host, device, bytes);
    };
    register_backend(info);
    for (const char* op : {"QuantizeLinear", "QLinearConv", "QLinearAdd", "QLinearGlobalAveragePool", "Flatten", "QGemm",
                           "DequantizeLinear", "Identity", "MaxPool"})
      register_kernel("fakedev", op, "fakedev", fake_kernel);
  });
}

std::map<std::string, Tensor> input_of(const Model& m) {
  Tensor x({2, 3, 16, 16}, DType::kFloat32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 7919) % 255) / 64.0f - 2.0f;
  return {{m.inputs()[0].name, x}};
}

}  // namespace

// QuantizeLinear -> QLinearConv -> MaxPool (CPU) -> QLinearConv -> QLinearAdd -> ... ->
// DequantizeLinear -> Identity: values between two device kernels live in the device
// arena, the others on the host; outputs and watched values equal the reference's.
TEST(DevicePlacement, ValuesBetweenDeviceKernelsStayOnTheDevice) {
  register_fake_device();
  const std::string path = std::string(QFX_FIXTURE_DIR) + "/onnx/qdq_convnet.onnx";
  Model ref = Model::load(path, ModelOptions("reference"));
  Model dev = Model::load(path, ModelOptions("fakedev"));
  const auto feeds = input_of(ref);
  FakeDevice& d = fake();
  d.misplaced = d.device_reads = d.copies_to_host = 0;
  const auto a = ref.run(feeds), b = dev.run(feeds);
  EXPECT_EQ(d.misplaced, 0);
  EXPECT_GT(d.device_reads, 0) << "no kernel read a device-resident value";
  for (const auto& [name, t] : a) EXPECT_EQ(std::memcmp(t.raw(), b.at(name).raw(), t.nbytes()), 0) << name;
  EXPECT_EQ(d.copies_to_host, 0) << "nothing observed: no device value needs copying";
  int on_device = 0;
  for (const auto& c : dev.kernel_report()) {
    on_device += c.device_outputs;
    if (c.op == "MaxPool") EXPECT_EQ(c.impl, "reference");
    // The first convolution feeds the CPU's MaxPool; the model output is read by the host.
    if (c.op == "QLinearConv" && c.outputs.size() == 1) {
      bool feeds_cpu = false;
      for (const auto& m : dev.kernel_report())
        if (m.op == "MaxPool" && !m.inputs.empty() && m.inputs[0] == c.outputs[0]) feeds_cpu = true;
      if (feeds_cpu) EXPECT_FALSE(c.device_outputs) << c.node << " feeds the CPU's MaxPool";
    }
    if (c.op == "Identity") EXPECT_FALSE(c.device_outputs) << "the model output must be on the host";
  }
  EXPECT_GE(on_device, 5);
  // Watching every value: device-resident ones come through device_to_host, equal to the reference's.
  std::map<std::string, Tensor> seen_ref, seen_dev;
  ref.run(feeds, ref.value_names(), [&](const std::string& v, const Tensor& t) { seen_ref[v] = t.clone(); },
          Model::WatchLayout::kPlain);
  dev.run(feeds, dev.value_names(), [&](const std::string& v, const Tensor& t) { seen_dev[v] = t.clone(); },
          Model::WatchLayout::kPlain);
  ASSERT_EQ(seen_ref.size(), seen_dev.size());
  for (const auto& [v, t] : seen_ref) EXPECT_EQ(std::memcmp(t.raw(), seen_dev.at(v).raw(), t.nbytes()), 0) << v;
  EXPECT_GT(d.copies_to_host, 0) << "a watched device value must be copied to the host";
  EXPECT_EQ(d.misplaced, 0);
}
