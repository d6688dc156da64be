// Dataset readers: image folders against torchvision's preprocessing of the same
// files (PIL decode, Resize, CenterCrop, Grayscale, Normalize), IDX against the
// raw bytes, sample selection, and the errors users meet.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "fx/fixtures.h"
#include "qfx/error.h"
#include "qfx/quant/data.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/job_config.h"
#include "qfx/runtime/npy.h"

using namespace qfx;
using namespace qfx::quant;
namespace fs = std::filesystem;

namespace {

at::Tensor npy(const std::string& path) {
  auto t = runtime::load_npy(path);
  return at::from_blob(t.raw(), t.shape(), at::kFloat).clone();
}

DataSpec small_images() {
  DataSpec d;
  d.format = "images";
  d.images = test::fixture("images/small");
  d.labels = "subfolders";
  d.resize = 32;
  d.crop = 28;
  d.mean = {0.485, 0.456, 0.406};
  d.std = {0.229, 0.224, 0.225};
  return d;
}

fs::path scratch(const std::string& name) {
  fs::path p = fs::path(qfx::test::scratch_path()) / ("qfx_dataset_test_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

}  // namespace

// PNG and JPEG, RGB and gray, of several sizes: decoded with libpng / libjpeg-turbo,
// resized (antialiased bilinear), cropped and normalised as torchvision does. PIL
// rounds to 8 bits after each resize pass; we do not, so values may differ by about
// one 8-bit level, and no more.
TEST(Dataset, ImageFolderMatchesTorchvision) {
  auto ds = open_dataset(small_images(), {-1, 3, 28, 28});
  ASSERT_EQ(ds->size(), 12);
  EXPECT_EQ(ds->sample_shape(), (std::vector<int64_t>{3, 28, 28}));
  at::Tensor got = ds->batch(0, 12), want = npy(test::fixture("images/small.expected.npy"));
  ASSERT_EQ(got.sizes(), want.sizes());
  at::Tensor std = at::tensor({0.229, 0.224, 0.225}, at::kFloat).view({1, 3, 1, 1});
  at::Tensor levels = ((got - want) * std * 255.0).abs();
  EXPECT_LT(levels.max().item<double>(), 1.6) << "max difference in 8-bit levels";
  EXPECT_LT(levels.mean().item<double>(), 0.3);
  // Labels: index of the sorted subfolder (shirt = 0, shoe = 1).
  at::Tensor y = ds->labels();
  ASSERT_EQ(y.numel(), 12);
  EXPECT_EQ(y.sum().item<int64_t>(), 6);
  EXPECT_EQ(y[0].item<int64_t>(), 0);
  EXPECT_EQ(y[11].item<int64_t>(), 1);
}

TEST(Dataset, GrayAndBgrConversions) {
  DataSpec d = small_images();
  d.color = "gray";
  d.mean = {0.5};
  d.std = {0.25};
  d.labels.clear();
  auto ds = open_dataset(d, {-1, 1, 28, 28});
  at::Tensor levels = ((ds->batch(0, 12) - npy(test::fixture("images/small.gray.expected.npy"))) * 0.25 * 255.0).abs();
  EXPECT_LT(levels.max().item<double>(), 1.6);  // PIL also rounds the luma to 8 bits
  DataSpec b = small_images();
  b.color = "bgr";
  b.mean = {0.0};
  b.std = {1.0};
  DataSpec r = b;
  r.color = "rgb";
  at::Tensor xb = open_dataset(b, {-1, 3, 28, 28})->batch(0, 3), xr = open_dataset(r, {-1, 3, 28, 28})->batch(0, 3);
  EXPECT_TRUE(at::equal(xb, xr.flip({1})));
}

TEST(Dataset, IdxMatchesRawBytesAndSelectsBySeed) {
  const std::string path = fashion_mnist_dir() + "/t10k-images-idx3-ubyte.gz";
  DataSpec d;
  d.images = path;
  d.labels = fashion_mnist_dir() + "/t10k-labels-idx1-ubyte.gz";
  d.mean = {0.2860};
  d.std = {0.3530};
  at::Tensor raw = read_idx(path).to(at::kFloat).div(255.0).sub(0.2860).div(0.3530).unsqueeze(1);
  auto first = open_dataset(d, {-1, 1, 28, 28}, 100, -1);
  EXPECT_EQ(first->size(), 100);
  EXPECT_TRUE(at::allclose(first->batch(0, 100), raw.slice(0, 0, 100), 0, 1e-6));
  EXPECT_TRUE(at::equal(first->labels(), read_idx(d.labels).to(at::kLong).slice(0, 0, 100)));
  // seed >= 0: a random subset without repeats, the same for the same seed.
  auto a = open_dataset(d, {-1, 1, 28, 28}, 64, 7), b = open_dataset(d, {-1, 1, 28, 28}, 64, 7);
  EXPECT_TRUE(at::equal(a->batch(0, 64), b->batch(0, 64)));
  EXPECT_FALSE(at::equal(a->batch(0, 64), first->batch(0, 64)));
  at::Tensor la = a->labels();
  std::set<int64_t> classes;
  for (int64_t i = 0; i < 64; ++i) classes.insert(la[i].item<int64_t>());
  EXPECT_GE(classes.size(), 8u) << "a random subset spans the classes; the first 64 in order would too, but not in this order";
  // Batches are read on demand: the same sample read twice is the same.
  EXPECT_TRUE(at::equal(a->batch(10, 20), a->batch(0, 64).slice(0, 10, 20)));
}

TEST(Dataset, RawFloatFiles) {
  fs::path dir = scratch("raw");
  at::Tensor x = at::randn({3, 2, 4, 4});
  for (int i = 0; i < 3; ++i) {
    std::ofstream f(dir / ("s" + std::to_string(i) + ".raw"), std::ios::binary);
    at::Tensor s = x[i].contiguous();
    f.write(static_cast<const char*>(s.data_ptr()), static_cast<std::streamsize>(s.nbytes()));
  }
  DataSpec d;
  d.format = "raw";
  d.images = dir.string();
  EXPECT_TRUE(at::equal(open_dataset(d, {-1, 2, 4, 4})->batch(0, 3), x));
  // A file of the wrong size is named.
  std::ofstream(dir / "s9.raw", std::ios::binary) << "short";
  auto ds = open_dataset(d, {-1, 2, 4, 4});
  try {
    ds->batch(0, 4);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("s9.raw"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Dataset, ErrorsNameTheFileOrFolder) {
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  DataSpec d = small_images();
  // Channels or size that do not fit the model input.
  EXPECT_NE(message([&] { open_dataset(d, {-1, 1, 28, 28}); }).find("the model input takes 1x28x28"), std::string::npos);
  EXPECT_NE(message([&] { open_dataset(d, {-1, 3, 224, 224}); }).find("3x224x224"), std::string::npos);
  // A missing folder, an empty one, a non-image file with an image extension.
  d.images = "/nonexistent/qfx/folder";
  EXPECT_NE(message([&] { open_dataset(d, {-1, 3, 28, 28}); }).find("/nonexistent/qfx/folder"), std::string::npos);
  fs::path empty = scratch("empty");
  d.images = empty.string();
  EXPECT_NE(message([&] { open_dataset(d, {-1, 3, 28, 28}); }).find("no .png, .jpg, .jpeg files"), std::string::npos);
  std::ofstream(empty / "broken.png") << "not a png";
  EXPECT_NE(message([&] { open_dataset(d, {-1, 3, 28, 28}); }).find("broken.png"), std::string::npos);
  fs::remove_all(empty);
  // A crop larger than the image.
  d = small_images();
  d.resize = 0;
  d.crop = 64;
  EXPECT_NE(message([&] { open_dataset(d, {-1, 3, 64, 64}); }).find("smaller than crop 64"), std::string::npos);
  // Labels whose count differs from the images.
  DataSpec idx;
  idx.images = fashion_mnist_dir() + "/t10k-images-idx3-ubyte.gz";
  idx.labels = fashion_mnist_dir() + "/train-labels-idx1-ubyte.gz";
  EXPECT_NE(message([&] { open_dataset(idx, {-1, 1, 28, 28}); }).find("60000 labels for 10000 images"), std::string::npos);
}

namespace {

// A reader registered by a user (the README's "a data reader" recipe): N samples
// whose every value is the sample index, for any input shape.
class IndexReader : public Dataset {
 public:
  IndexReader(const DataSpec& spec, const std::vector<int64_t>& input_shape, int64_t limit, int64_t seed) {
    sample_shape_.assign(input_shape.begin() + 1, input_shape.end());
    source_ = "index-reader:" + spec.images;
    select(std::stoll(fs::path(spec.images).filename().string()), limit, seed);  // images: the sample count (paths resolve against the config folder)
  }

 protected:
  void read(int64_t id, float* dst) override {
    int64_t n = 1;
    for (auto d : sample_shape_) n *= d;
    std::fill(dst, dst + n, static_cast<float>(id));
  }
};

}  // namespace

TEST(Dataset, RegisteredReaderIsAcceptedByConfigsAndOpened) {
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const qfx::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  register_data_reader("index_test", [](const DataSpec& s, const std::vector<int64_t>& shape, int64_t limit, int64_t seed) {
    return std::unique_ptr<Dataset>(std::make_unique<IndexReader>(s, shape, limit, seed));
  });
  auto formats = data_reader_formats();
  for (const char* f : {"idx", "images", "npy", "raw", "index_test"})
    EXPECT_NE(std::find(formats.begin(), formats.end(), f), formats.end()) << f;
  const auto dir = fs::path(qfx::test::scratch_path()) / ("qfx_reader_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto cfg_path = (dir / "cfg.yaml").string();
  std::ofstream(cfg_path) << "model: {path: m.pt, input_shape: [-1, 2, 3, 3]}\n"
                             "calibration:\n  data: {format: index_test, images: '40'}\n  num_samples: 5\n  seed: -1\n";
  JobConfig cfg = load_job_config(cfg_path);
  EXPECT_EQ(cfg.calibration.data.format, "index_test");
  auto ds = open_dataset(cfg.calibration.data, cfg.model.input_shape, cfg.calibration.num_samples, cfg.calibration.seed);
  ASSERT_EQ(ds->size(), 5);
  at::Tensor b = ds->batch(0, 5);
  ASSERT_EQ(b.sizes(), (std::vector<int64_t>{5, 2, 3, 3}));
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(b[i].min().item<float>(), static_cast<float>(i));
  // An unregistered format is a config error naming the registered ones.
  std::ofstream(cfg_path) << "model: {path: m.pt, input_shape: [-1, 2, 3, 3]}\n"
                             "calibration:\n  data: {format: parquet, images: x}\n";
  EXPECT_NE(message([&] { load_job_config(cfg_path); }).find("index_test"), std::string::npos);
  fs::remove_all(dir);
}

namespace {

// A reader that records which threads read, and fails on two samples.
class ThreadRecordingReader : public Dataset {
 public:
  ThreadRecordingReader(bool concurrent, int64_t n) : concurrent_(concurrent) {
    sample_shape_ = {4};
    source_ = "recording";
    select(n, 0, -1);
  }
  bool concurrent_reads() const override { return concurrent_; }
  std::set<std::thread::id> threads;

 protected:
  void read(int64_t id, float* dst) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      threads.insert(std::this_thread::get_id());
    }
    if (id == 3 || id == 5) throw DataError("sample " + std::to_string(id) + " is unreadable");
    std::fill(dst, dst + 4, static_cast<float>(id));
  }

 private:
  bool concurrent_;
  std::mutex mu_;
};

}  // namespace

// A batch's samples are read on libtorch's threads when the reader allows it: the
// batch equals reading the samples one at a time, in any order of positions; the
// error raised is the first failing sample's in batch order, every time; a reader
// that does not say it is safe is read on the calling thread only.
TEST(Dataset, ConcurrentReadsEqualOneByOneAndRaiseTheFirstError) {
  const int threads_before = at::get_num_threads();
  at::set_num_threads(2);  // whatever this machine's default, two readers
  auto ds = open_dataset(small_images(), {-1, 3, 28, 28});
  ASSERT_TRUE(ds->concurrent_reads());
  const at::Tensor all = ds->batch(0, ds->size());
  for (int64_t i = 0; i < ds->size(); ++i) EXPECT_TRUE(at::equal(all[i], ds->batch(i, i + 1)[0])) << "sample " << i;
  std::vector<int64_t> order;
  for (int64_t i = ds->size() - 1; i >= 0; --i) order.push_back(i);
  EXPECT_TRUE(at::equal(ds->gather(order), all.flip({0})));

  ThreadRecordingReader concurrent(true, 16);
  std::vector<int64_t> good{0, 1, 2, 4, 6, 7, 8, 9};
  const at::Tensor b = concurrent.gather(good);
  for (size_t i = 0; i < good.size(); ++i) EXPECT_EQ(b[static_cast<int64_t>(i)][0].item<float>(), static_cast<float>(good[i]));
  EXPECT_EQ(concurrent.threads.size(), 2u);
  for (int k = 0; k < 20; ++k) {
    try {
      concurrent.batch(0, 16);
      FAIL() << "expected DataError";
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()), "sample 3 is unreadable");
    }
  }
  ThreadRecordingReader serial(false, 16);
  serial.batch(0, 3);
  EXPECT_EQ(serial.threads, (std::set<std::thread::id>{std::this_thread::get_id()}));
  at::set_num_threads(threads_before);
}

// Inputs the IDX fuzzer found (tests/fuzz/regressions/idx/): each is a clean
// IoError/DataError naming the file, quickly (a header of 268M empty images once
// allocated gigabytes before failing).
// Images the image fuzzer found (tests/fuzz/regressions/image/): a JPEG header
// declaring 9 GB of pixels is an IoError naming the file before any allocation.
TEST(FuzzRegressions, ImageInputsFailCleanly) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(QFX_SOURCE_DIR) + "/tests/fuzz/regressions/image")) {
    ++files;
    try {
      at::Tensor img = qfx::quant::decode_image(e.path().string());
      ADD_FAILURE() << e.path() << " decoded to " << img.sizes();
    } catch (const qfx::Error& err) {
      EXPECT_NE(std::string(err.what()).find(e.path().filename().string()), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("decompression-bomb limit"), std::string::npos) << err.what();
      EXPECT_EQ(err.exit_code(), 7) << err.what();
    }
  }
  EXPECT_GE(files, 1);
}

TEST(FuzzRegressions, IdxInputsFailCleanly) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(QFX_SOURCE_DIR) + "/tests/fuzz/regressions/idx")) {
    ++files;
    qfx::quant::DataSpec spec;
    spec.format = "idx";
    spec.images = e.path().string();
    try {
      auto ds = qfx::quant::open_dataset(spec, {-1, 1, -1, -1}, 4, 0);
      ADD_FAILURE() << e.path() << " opened with " << ds->size() << " samples";
    } catch (const qfx::Error& err) {
      EXPECT_NE(std::string(err.what()).find(e.path().filename().string()), std::string::npos) << err.what();
      EXPECT_EQ(err.exit_code(), 7) << err.what();  // IoError, as the README's error table says
    }
  }
  EXPECT_GE(files, 1);
}
