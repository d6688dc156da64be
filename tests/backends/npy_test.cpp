// .npy reading and writing, checked against files NumPy itself wrote.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"

#include <cstdlib>
#include <fstream>

#include "qfx/error.h"
#include "qfx/runtime/npy.h"

using namespace qfx::runtime;

namespace {
// Writes `text` (Python) to a script and runs it with QFX_PYTHON (NumPy).
bool numpy(const std::string& code) {
  const std::string py = qfx::test::scratch_path() + "/np_script.py";
  std::ofstream(py) << "import numpy as np\n" << code;
  return std::system((std::string("\"") + QFX_PYTHON + "\" " + py).c_str()) == 0;
}
}  // namespace

TEST(Npy, ReadsWhatNumPyWrites) {
  const std::string dir = qfx::test::scratch_path();
  ASSERT_TRUE(numpy("np.save('" + dir + "/f.npy', np.arange(24, dtype=np.float32).reshape(2,3,4) * 0.5)\n"
                    "np.save('" + dir + "/u.npy', np.array([0, 7, 255], dtype=np.uint8))\n"
                    "np.save('" + dir + "/l.npy', np.array(-5, dtype=np.int64))\n"));
  Tensor f = load_npy(dir + "/f.npy");
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_FLOAT_EQ(f.data<float>()[23], 11.5f);
  Tensor u = load_npy(dir + "/u.npy");
  EXPECT_EQ(u.dtype(), DType::kUInt8);
  EXPECT_EQ(u.data<uint8_t>()[2], 255);
  Tensor l = load_npy(dir + "/l.npy");
  EXPECT_TRUE(l.shape().empty());
  EXPECT_EQ(l.data<int64_t>()[0], -5);
}

TEST(Npy, ZeroSizedArraysAreEmptyNotTruncated) {
  // A zero anywhere in the shape: no data follows the header, and none is needed.
  const std::string dir = qfx::test::scratch_path();
  ASSERT_TRUE(numpy("np.save('" + dir + "/z0.npy', np.zeros((0, 3), np.float32))\n"
                    "np.save('" + dir + "/z1.npy', np.zeros((3, 0), np.float32))\n"
                    "np.save('" + dir + "/z2.npy', np.zeros((2, 5, 0, 7), np.int64))\n"));
  const std::vector<std::vector<int64_t>> want = {{0, 3}, {3, 0}, {2, 5, 0, 7}};
  for (int i = 0; i < 3; ++i) {
    Tensor t = load_npy(dir + "/z" + std::to_string(i) + ".npy");
    EXPECT_EQ(t.shape(), want[static_cast<size_t>(i)]);
    EXPECT_EQ(t.numel(), 0);
  }
}

TEST(Npy, NumPyReadsWhatWeWrite) {
  const std::string dir = qfx::test::scratch_path();
  Tensor t({3, 2}, DType::kInt32);
  for (int i = 0; i < 6; ++i) t.data<int32_t>()[i] = i * i - 3;
  save_npy(dir + "/w.npy", t);
  Tensor one({4}, DType::kFloat32);
  one.data<float>()[3] = 2.5f;
  save_npy(dir + "/w1.npy", one);
  EXPECT_TRUE(numpy("a = np.load('" + dir + "/w.npy')\n"
                    "assert a.dtype == np.int32 and a.shape == (3, 2), (a.dtype, a.shape)\n"
                    "assert (a.ravel() == np.arange(6)**2 - 3).all()\n"
                    "b = np.load('" + dir + "/w1.npy')\n"
                    "assert b.shape == (4,) and b[3] == 2.5\n"));
}

TEST(Npy, BadFilesAreIoErrors) {
  const std::string dir = qfx::test::scratch_path();
  EXPECT_THROW(load_npy(dir + "/missing.npy"), qfx::IoError);
  std::ofstream(dir + "/bad.npy") << "definitely not numpy";
  EXPECT_THROW(load_npy(dir + "/bad.npy"), qfx::IoError);
  ASSERT_TRUE(numpy("np.save('" + dir + "/d.npy', np.zeros(3, dtype=np.float64))\n"
                    "np.save('" + dir + "/t.npy', np.zeros(1000, dtype=np.float32))\n"));
  try {
    load_npy(dir + "/d.npy");
    FAIL();
  } catch (const qfx::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported dtype '<f8'"), std::string::npos) << e.what();
  }
  // Truncate the data part.
  std::ifstream in(dir + "/t.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir + "/t.npy", std::ios::binary | std::ios::trunc) << bytes.substr(0, 500);
  try {
    load_npy(dir + "/t.npy");
    FAIL();
  } catch (const qfx::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated data"), std::string::npos) << e.what();
  }
}

namespace {

// A version-2 .npy file whose header is `header` (padding as NumPy pads it), then `data`.
void write_npy_v2(const std::string& path, const std::string& header, const std::string& data = "") {
  std::string h = header;
  while ((12 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
  const uint32_t n = static_cast<uint32_t>(h.size());
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((n >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes << h << data;
}

}  // namespace

// Headers come from files: a scan, linear in their length, reads them. A header of
// hundreds of kilobytes (a regular expression engine that recurses per character
// overflows the stack on it), keys out of order with odd spacing, and broken values.
TEST(Npy, HostileHeadersAreReadLinearlyOrRefused) {
  const std::string dir = qfx::test::scratch_path();
  const std::string pad(900000, ' ');
  write_npy_v2(dir + "/long.npy", "{'descr': '<f4'," + pad + "'fortran_order': False, 'shape': (2,), }",
               std::string(8, '\0'));
  Tensor t = load_npy(dir + "/long.npy");
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2}));
  write_npy_v2(dir + "/odd.npy", "{'shape':(1, 3),'fortran_order' :False ,'descr'  :  '|u1'}", "abc");
  Tensor u = load_npy(dir + "/odd.npy");
  EXPECT_EQ(u.shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(u.data<uint8_t>()[2], 'c');
  const std::pair<const char*, const char*> bad[] = {
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", "neither True nor False"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", "unsupported dtype"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 2, }", "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,", "not closed"},
      {"{'fortran_order': False, 'shape': (2,), }", "no descr"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", "bad shape"},
  };
  for (const auto& [header, why] : bad) {
    write_npy_v2(dir + "/bad.npy", header, std::string(8, '\0'));
    try {
      load_npy(dir + "/bad.npy");
      ADD_FAILURE() << header;
    } catch (const qfx::IoError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << header << " -> " << e.what();
    }
  }
}
