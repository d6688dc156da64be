// Datasets read batch by batch (IDX, image folders via libpng/libjpeg, npy, raw).
#include "qfx/quant/dataset.h"

#include <ATen/ATen.h>
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <regex>
#include <random>

#include "qfx/error.h"
#include "qfx/quant/data.h"
#include "qfx/runtime/npy.h"

namespace qfx::quant {
namespace fs = std::filesystem;
namespace {

std::string dims_str(const std::vector<int64_t>& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "x" : "") + (s[i] < 0 ? std::string("?") : std::to_string(s[i]));
  return o;
}

// Sample shape check against the model input's non-batch dims (-1 matches anything).
void check_fits(const std::vector<int64_t>& sample, const std::vector<int64_t>& input_shape, const std::string& what) {
  bool ok = input_shape.size() == sample.size() + 1;
  for (size_t i = 0; ok && i < sample.size(); ++i) ok = input_shape[i + 1] < 0 || input_shape[i + 1] == sample[i];
  if (!ok) {
    std::vector<int64_t> want(input_shape.begin() + (input_shape.empty() ? 0 : 1), input_shape.end());
    throw DataError(what + ": samples are " + (sample.empty() ? std::string("scalars (a 1-D array [N])") : dims_str(sample)) +
                    "; the model input takes " + dims_str(want) + " per sample, so the data must be [N, " +
                    std::regex_replace(dims_str(want), std::regex("x"), ", ") + "] (check the channels, resize and crop)");
  }
}

// NaN or Inf in input data: a DataError naming the file and the first such element
// (no observer, metric or model output means anything over them).
void check_finite(const at::Tensor& data, const std::string& file) {
  const at::Tensor bad = at::logical_not(at::isfinite(data)).reshape({-1}).nonzero();
  if (bad.numel() == 0) return;
  int64_t flat = bad[0][0].item<int64_t>();
  std::string where;
  for (int64_t d = data.dim() - 1; d >= 0; --d) {
    where = std::to_string(flat % data.size(d)) + (where.empty() ? "" : ", ") + where;
    flat /= data.size(d);
  }
  throw DataError(file + ": " + std::to_string(bad.size(0)) + " NaN or Inf value(s), the first at [" + where +
                  "] (sample " + where.substr(0, where.find(',')) + "); data must be finite");
}

int64_t numel(const std::vector<int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<int64_t>());
}

double per_channel(const std::vector<double>& v, int64_t c) {
  return v.size() == 1 ? v[0] : v.at(static_cast<size_t>(c));
}

}  // namespace

at::Tensor npy_labels(const std::string& path, int64_t count, const std::string& samples) {
  auto l = runtime::load_npy(path);
  if (l.shape().empty() || (l.dtype() != runtime::DType::kInt64 && l.dtype() != runtime::DType::kInt32))
    throw DataError(path + ": expected int64 or int32 labels: a class per sample [N], or per pixel [N, H, W]");
  if (l.shape()[0] != count)
    throw DataError(path + ": " + std::to_string(l.shape()[0]) + " labels for " + std::to_string(count) + " samples in " + samples);
  return at::from_blob(const_cast<void*>(l.raw()), l.shape(), l.dtype() == runtime::DType::kInt64 ? at::kLong : at::kInt)
      .to(at::kLong, false, true);
}

namespace {

// --- IDX (Fashion-MNIST) ----------------------------------------------------------
class IdxDataset : public Dataset {
 public:
  IdxDataset(const DataSpec& s, const std::vector<int64_t>& input_shape, int64_t limit, int64_t seed) : spec_(s) {
    source_ = s.images;
    raw_ = read_idx(s.images);
    if (raw_.dim() != 3) throw DataError(s.images + ": expected IDX images [N, rows, cols], got rank " + std::to_string(raw_.dim()));
    sample_shape_ = {1, raw_.size(1), raw_.size(2)};
    check_fits(sample_shape_, input_shape, s.images);
    if (s.mean.size() != 1 || s.std.size() != 1) throw DataError(s.images + ": IDX images have one channel; give one mean and one std");
    select(raw_.size(0), limit, seed);
    if (!s.labels.empty()) {
      at::Tensor all = read_idx(s.labels);
      if (all.dim() != 1) throw DataError(s.labels + ": expected IDX labels [N], got rank " + std::to_string(all.dim()));
      if (all.size(0) != raw_.size(0))
        throw DataError(s.labels + ": " + std::to_string(all.size(0)) + " labels for " + std::to_string(raw_.size(0)) +
                        " images in " + s.images);
      labels_ = all.to(at::kLong).index_select(0, at::tensor(index_, at::kLong));
    }
  }

  bool concurrent_reads() const override { return true; }

 protected:
  void read(int64_t id, float* dst) override {
    const uint8_t* p = raw_.data_ptr<uint8_t>() + id * raw_.size(1) * raw_.size(2);
    const float m = static_cast<float>(spec_.mean[0]), inv = static_cast<float>(1.0 / spec_.std[0]);
    for (int64_t i = 0; i < raw_.size(1) * raw_.size(2); ++i) dst[i] = (static_cast<float>(p[i]) / 255.0f - m) * inv;
  }

 private:
  DataSpec spec_;
  at::Tensor raw_;  // uint8 [N, rows, cols]: 4x smaller than the floats
};

// --- npy ------------------------------------------------------------------------
class NpyDataset : public Dataset {
 public:
  NpyDataset(const DataSpec& s, const std::vector<int64_t>& input_shape, int64_t limit, int64_t seed) {
    source_ = s.images;
    const runtime::Tensor a = runtime::load_npy(s.images);
    const runtime::DType t = a.dtype();
    if (a.shape().empty() || (t != runtime::DType::kFloat32 && t != runtime::DType::kInt64 && t != runtime::DType::kInt32))
      throw DataError(s.images + ": expected a float32, int64 or int32 array [N, ...], got " + dtype_name(t) +
                      (a.shape().empty() ? " of rank 0" : ""));
    // Integer arrays (token ids, masks) stay integers, int32 widened to int64.
    const at::ScalarType st = t == runtime::DType::kFloat32 ? at::kFloat : t == runtime::DType::kInt64 ? at::kLong : at::kInt;
    data_ = at::from_blob(const_cast<void*>(a.raw()), a.shape(), st).to(st == at::kInt ? at::kLong : st, false, true);
    dtype_ = data_.scalar_type();
    if (dtype_ == at::kFloat) check_finite(data_, s.images);
    sample_shape_.assign(a.shape().begin() + 1, a.shape().end());
    check_fits(sample_shape_, input_shape, s.images);
    select(a.shape()[0], limit, seed);
    if (!s.labels.empty()) labels_ = npy_labels(s.labels, a.shape()[0], s.images).index_select(0, at::tensor(index_, at::kLong));
  }

  bool concurrent_reads() const override { return true; }

 protected:
  void read(int64_t id, float* dst) override { read_typed(id, dst); }
  void read_typed(int64_t id, void* dst) override {
    const size_t bytes = static_cast<size_t>(numel(sample_shape_)) * data_.element_size();
    std::memcpy(dst, static_cast<const char*>(data_.data_ptr()) + static_cast<size_t>(id) * bytes, bytes);
  }

 private:
  at::Tensor data_;  // float32 or int64 [N, ...], contiguous
};

// Files of a folder with one of `exts` (lower case), recursively, sorted by path.
std::vector<fs::path> list_files(const std::string& dir, const std::vector<std::string>& exts) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw IoError(dir + ": not a folder (missing or not a directory)");
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::string ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (std::find(exts.begin(), exts.end(), ext) != exts.end()) out.push_back(it->path());
  }
  if (ec) throw IoError(dir + ": cannot list: " + ec.message());
  std::sort(out.begin(), out.end());
  std::string list;
  for (const auto& e : exts) list += (list.empty() ? "" : ", ") + e;
  if (out.empty()) throw IoError(dir + ": no " + list + " files in this folder");
  return out;
}

// --- image folders ------------------------------------------------------------------
class ImageDataset : public Dataset {
 public:
  ImageDataset(const DataSpec& s, const std::vector<int64_t>& input_shape, int64_t limit, int64_t seed) : spec_(s) {
    source_ = s.images;
    files_ = list_files(s.images, {".png", ".jpg", ".jpeg"});
    if (!s.labels.empty() && s.labels != "subfolders")
      throw ConfigError(s.images + ": labels of an image folder must be 'subfolders' (class = index of the sorted subfolder)");
    // The first image fixes the sample shape; the others must match it.
    at::Tensor first = preprocess_image(decode_image(files_[0].string()), spec_, files_[0].string());
    sample_shape_.assign(first.sizes().begin(), first.sizes().end());
    check_fits(sample_shape_, input_shape, files_[0].string());
    select(static_cast<int64_t>(files_.size()), limit, seed);
    if (s.labels == "subfolders") {
      std::map<std::string, int64_t> classes;
      for (const auto& f : files_) classes[fs::relative(f.parent_path(), s.images).string()] = 0;
      if (classes.size() < 2 && classes.count("."))
        throw DataError(s.images + ": labels: subfolders needs the images in one subfolder per class");
      int64_t k = 0;
      for (auto& kv : classes) kv.second = k++;
      std::vector<int64_t> l;
      for (int64_t id : index_) l.push_back(classes.at(fs::relative(files_[static_cast<size_t>(id)].parent_path(), s.images).string()));
      labels_ = at::tensor(l, at::kLong);
    }
  }

  bool concurrent_reads() const override { return true; }

 protected:
  void read(int64_t id, float* dst) override {
    const std::string path = files_[static_cast<size_t>(id)].string();
    at::Tensor x = preprocess_image(decode_image(path), spec_, path);
    if (std::vector<int64_t>(x.sizes().begin(), x.sizes().end()) != sample_shape_)
      throw DataError(path + ": " + dims_str(std::vector<int64_t>(x.sizes().begin(), x.sizes().end())) +
                      " after preprocessing, unlike the other images (" + dims_str(sample_shape_) +
                      "); set resize and crop so every image ends the same size");
    std::memcpy(dst, x.data_ptr<float>(), static_cast<size_t>(x.numel()) * sizeof(float));
  }

 private:
  DataSpec spec_;
  std::vector<fs::path> files_;
};

// --- raw float32 files --------------------------------------------------------------
class RawDataset : public Dataset {
 public:
  RawDataset(const DataSpec& s, const std::vector<int64_t>& input_shape, int64_t limit, int64_t seed) {
    source_ = s.images;
    files_ = list_files(s.images, {".raw", ".bin"});
    sample_shape_.assign(input_shape.begin() + (input_shape.empty() ? 0 : 1), input_shape.end());
    for (auto d : sample_shape_)
      if (d < 0) throw DataError(s.images + ": raw files need a model.input_shape with fixed non-batch dims");
    if (!s.labels.empty()) throw ConfigError(s.images + ": raw data has no labels");
    select(static_cast<int64_t>(files_.size()), limit, seed);
  }

  bool concurrent_reads() const override { return true; }

 protected:
  void read(int64_t id, float* dst) override {
    const std::string path = files_[static_cast<size_t>(id)].string();
    const auto want = static_cast<uintmax_t>(numel(sample_shape_)) * sizeof(float);
    std::error_code ec;
    const auto got = fs::file_size(path, ec);
    if (ec || got != want)
      throw DataError(path + ": " + (ec ? ec.message() : std::to_string(got) + " bytes") + "; a float32 sample of " +
                      dims_str(sample_shape_) + " is " + std::to_string(want) + " bytes");
    std::ifstream f(path, std::ios::binary);
    f.read(reinterpret_cast<char*>(dst), static_cast<std::streamsize>(want));
    if (!f) throw IoError(path + ": read failed");
  }

 private:
  std::vector<fs::path> files_;
};

// --- decoders ----------------------------------------------------------------------
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// libjpeg's warnings: a file that ends before its image does ("Premature end of JPEG
// file") is an error, as PIL refuses a truncated image; other warnings are ignored.
void jpeg_warning(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
}

// Images larger than this are refused before decoding: PIL's decompression-bomb
// error threshold (2 x Image.MAX_IMAGE_PIXELS = 2 x 89,478,485). A few bytes of
// JPEG or PNG can declare gigapixels.
constexpr uint64_t kMaxImagePixels = 178956970;

std::string too_large(uint64_t w, uint64_t h) {
  return "declares " + std::to_string(w) + "x" + std::to_string(h) + " pixels, more than the " +
         std::to_string(kMaxImagePixels) + " qfx decodes (PIL's decompression-bomb limit)";
}

// Decodes into `out` (RGB HWC); returns false with `err` set on failure. Only POD
// locals live across setjmp.
bool decode_jpeg(FILE* f, std::vector<uint8_t>* out, int* h, int* w, char* err) {
  jpeg_decompress_struct cinfo;
  JpegError je;
  cinfo.err = jpeg_std_error(&je.mgr);
  je.mgr.error_exit = jpeg_fail;
  je.mgr.emit_message = jpeg_warning;
  if (setjmp(je.jump)) {
    std::strncpy(err, je.message, JMSG_LENGTH_MAX);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, f);
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<uint64_t>(cinfo.image_width) * cinfo.image_height > kMaxImagePixels) {
    std::snprintf(err, JMSG_LENGTH_MAX, "%s", too_large(cinfo.image_width, cinfo.image_height).c_str());
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  *h = static_cast<int>(cinfo.output_height);
  *w = static_cast<int>(cinfo.output_width);
  out->resize(static_cast<size_t>(*h) * static_cast<size_t>(*w) * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->data() + static_cast<size_t>(cinfo.output_scanline) * static_cast<size_t>(*w) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

// Antialiased bilinear resampling along one axis, as PIL's ImagingResample with
// the BILINEAR (triangle) filter: support scales with the downscaling factor.
// in: [outer, n_in, inner] -> out: [outer, n_out, inner].
void resample_axis(const float* in, float* out, int64_t outer, int64_t n_in, int64_t n_out, int64_t inner) {
  const double scale = static_cast<double>(n_in) / static_cast<double>(n_out);
  const double fscale = std::max(scale, 1.0), support = fscale;  // triangle support 1
  for (int64_t o = 0; o < n_out; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(center - support + 0.5));
    const int64_t hi = std::min<int64_t>(n_in, static_cast<int64_t>(center + support + 0.5));
    std::vector<double> wts;
    double sum = 0;
    for (int64_t i = lo; i < hi; ++i) {
      const double t = std::abs((static_cast<double>(i) - center + 0.5) / fscale);
      const double wt = t < 1.0 ? 1.0 - t : 0.0;
      wts.push_back(wt);
      sum += wt;
    }
    for (auto& wt : wts) wt = sum > 0 ? wt / sum : 0;
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t c = 0; c < inner; ++c) {
        double acc = 0;
        for (int64_t i = lo; i < hi; ++i) acc += wts[static_cast<size_t>(i - lo)] * in[(a * n_in + i) * inner + c];
        out[(a * n_out + o) * inner + c] = static_cast<float>(acc);
      }
  }
}

}  // namespace

void Dataset::select(int64_t total, int64_t limit, int64_t seed) {
  const int64_t n = limit > 0 ? std::min(limit, total) : total;
  index_.resize(static_cast<size_t>(total));
  std::iota(index_.begin(), index_.end(), int64_t{0});
  if (seed >= 0 && n < total) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    for (int64_t i = 0; i < n; ++i) {  // partial Fisher-Yates
      std::uniform_int_distribution<int64_t> pick(i, total - 1);
      std::swap(index_[static_cast<size_t>(i)], index_[static_cast<size_t>(pick(rng))]);
    }
  }
  index_.resize(static_cast<size_t>(n));
}

at::Tensor decode_image(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw IoError(path + ": cannot open image (missing or unreadable)");
  unsigned char sig[8] = {0};
  const size_t got = std::fread(sig, 1, 8, f);
  std::rewind(f);
  std::vector<uint8_t> pix;
  int h = 0, w = 0;
  if (got == 8 && png_sig_cmp(sig, 0, 8) == 0) {
    std::fclose(f);
    png_image img;
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path.c_str()))
      throw IoError(path + ": not a readable PNG (" + img.message + ")");
    img.format = PNG_FORMAT_RGB;
    if (static_cast<uint64_t>(img.width) * img.height > kMaxImagePixels) {
      png_image_free(&img);
      throw IoError(path + ": PNG " + too_large(img.width, img.height));
    }
    h = static_cast<int>(img.height);
    w = static_cast<int>(img.width);
    pix.resize(PNG_IMAGE_SIZE(img));
    if (!png_image_finish_read(&img, nullptr, pix.data(), 0, nullptr)) {
      const std::string msg = img.message;
      png_image_free(&img);
      throw IoError(path + ": corrupt PNG (" + msg + ")");
    }
  } else if (got >= 3 && sig[0] == 0xFF && sig[1] == 0xD8 && sig[2] == 0xFF) {
    char err[JMSG_LENGTH_MAX] = {0};
    const bool ok = decode_jpeg(f, &pix, &h, &w, err);
    std::fclose(f);
    if (!ok) throw IoError(path + ": cannot decode JPEG (" + err + ")");
  } else {
    std::fclose(f);
    throw IoError(path + ": not a PNG or JPEG file");
  }
  at::Tensor t = at::empty({h, w, 3}, at::kByte);
  std::memcpy(t.data_ptr<uint8_t>(), pix.data(), pix.size());
  return t;
}

at::Tensor preprocess_image(const at::Tensor& hwc, const DataSpec& spec, const std::string& what) {
  int64_t h = hwc.size(0), w = hwc.size(1);
  at::Tensor img = hwc.to(at::kFloat).contiguous();  // [H, W, 3], 0..255
  if (spec.resize > 0 && std::min(h, w) != spec.resize) {
    // torchvision Resize(int): the shorter side becomes `resize`, the other keeps the aspect ratio.
    const int64_t nh = h <= w ? spec.resize : static_cast<int64_t>(static_cast<double>(spec.resize) * h / w);
    const int64_t nw = h <= w ? static_cast<int64_t>(static_cast<double>(spec.resize) * w / h) : spec.resize;
    // A thin image resized by its short side can grow to gigabytes: refuse it by name.
    if (static_cast<double>(nh) * static_cast<double>(nw) > static_cast<double>(kMaxImagePixels))
      throw DataError(what + ": a " + std::to_string(w) + "x" + std::to_string(h) + " image resized to " + std::to_string(spec.resize) +
                      " on its shorter side would be " + std::to_string(nw) + "x" + std::to_string(nh) + " pixels, more than the " +
                      std::to_string(kMaxImagePixels / 1000000) + " million qfx decodes (crop it, or lower resize)");
    at::Tensor tmp = at::empty({h, nw, 3}, at::kFloat), out = at::empty({nh, nw, 3}, at::kFloat);
    resample_axis(img.data_ptr<float>(), tmp.data_ptr<float>(), h, w, nw, 3);      // horizontal
    resample_axis(tmp.data_ptr<float>(), out.data_ptr<float>(), 1, h, nh, nw * 3);  // vertical
    img = out;
    h = nh;
    w = nw;
  }
  if (spec.crop > 0) {
    if (h < spec.crop || w < spec.crop)
      throw DataError(what + ": image is " + std::to_string(w) + "x" + std::to_string(h) + " after resize, smaller than crop " +
                      std::to_string(spec.crop));
    // torchvision CenterCrop: top = round((h - crop) / 2) (half to even, as Python's round).
    const int64_t top = static_cast<int64_t>(std::nearbyint((h - spec.crop) / 2.0));
    const int64_t left = static_cast<int64_t>(std::nearbyint((w - spec.crop) / 2.0));
    img = img.slice(0, top, top + spec.crop).slice(1, left, left + spec.crop);
  }
  at::Tensor chw;
  if (spec.color == "gray") {  // ITU-R 601-2 luma, as PIL's convert("L")
    chw = (img.select(2, 0) * 0.299 + img.select(2, 1) * 0.587 + img.select(2, 2) * 0.114).unsqueeze(0);
  } else {
    chw = img.permute({2, 0, 1});
    if (spec.color == "bgr") chw = chw.flip({0});
  }
  chw = chw.contiguous().div_(255.0);
  const int64_t C = chw.size(0);
  if (spec.mean.size() != 1 && static_cast<int64_t>(spec.mean.size()) != C)
    throw DataError(what + ": " + std::to_string(spec.mean.size()) + " mean values for " + std::to_string(C) + " channels");
  if (spec.std.size() != 1 && static_cast<int64_t>(spec.std.size()) != C)
    throw DataError(what + ": " + std::to_string(spec.std.size()) + " std values for " + std::to_string(C) + " channels");
  for (int64_t c = 0; c < C; ++c) chw[c].sub_(per_channel(spec.mean, c)).div_(per_channel(spec.std, c));
  return chw;
}

namespace {

std::map<std::string, DataReaderFactory>& readers() {
  static std::map<std::string, DataReaderFactory> r = [] {
    std::map<std::string, DataReaderFactory> m;
    m["idx"] = [](const DataSpec& s, const std::vector<int64_t>& shape, int64_t limit, int64_t seed) {
      return std::unique_ptr<Dataset>(std::make_unique<IdxDataset>(s, shape, limit, seed));
    };
    m["npy"] = [](const DataSpec& s, const std::vector<int64_t>& shape, int64_t limit, int64_t seed) {
      return std::unique_ptr<Dataset>(std::make_unique<NpyDataset>(s, shape, limit, seed));
    };
    m["images"] = [](const DataSpec& s, const std::vector<int64_t>& shape, int64_t limit, int64_t seed) {
      return std::unique_ptr<Dataset>(std::make_unique<ImageDataset>(s, shape, limit, seed));
    };
    m["raw"] = [](const DataSpec& s, const std::vector<int64_t>& shape, int64_t limit, int64_t seed) {
      return std::unique_ptr<Dataset>(std::make_unique<RawDataset>(s, shape, limit, seed));
    };
    return m;
  }();
  return r;
}

std::mutex& readers_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void register_data_reader(const std::string& format, DataReaderFactory factory) {
  std::lock_guard<std::mutex> lk(readers_mutex());
  readers()[format] = std::move(factory);
}

std::vector<std::string> data_reader_formats() {
  std::lock_guard<std::mutex> lk(readers_mutex());
  std::vector<std::string> out;
  for (const auto& kv : readers()) out.push_back(kv.first);
  return out;
}

std::unique_ptr<Dataset> open_dataset(const DataSpec& spec, const std::vector<int64_t>& input_shape, int64_t limit,
                                      int64_t seed) {
  DataReaderFactory f;
  {
    std::lock_guard<std::mutex> lk(readers_mutex());
    auto it = readers().find(spec.format);
    if (it != readers().end()) f = it->second;
  }
  if (!f) {
    std::string names;
    for (const auto& n : data_reader_formats()) names += (names.empty() ? "" : ", ") + n;
    throw ConfigError("unknown data format '" + spec.format + "' (registered: " + names + ")");
  }
  return f(spec, input_shape, limit, seed);
}

}  // namespace qfx::quant
