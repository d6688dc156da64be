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
