// Datasets for calibration and evaluation, read batch by batch: Fashion-MNIST IDX
// files, folders of PNG/JPEG images, .npy arrays and folders of raw float32 files.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace qfx::quant {

/// A dataset as a config names it (the `data:` mapping of `qfx ptq`):
///
/// ```yaml
/// data: {format: idx, images: IMAGES.gz, labels: LABELS.gz, mean: 0.2860, std: 0.3530}
/// data: {format: images, images: DIR, labels: subfolders, resize: 256, crop: 224,
///        color: rgb, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
/// data: {format: npy, images: X.npy, labels: Y.npy}  # float32 [N, ...], int64/int32 [N]
/// data: {format: raw, images: DIR}                   # one float32 file per sample
/// data:                                              # a model with several inputs:
///   input_ids: {format: npy, images: ids.npy}        #   one source per input, by name
///   attention_mask: {format: npy, images: mask.npy}  #   (int64 npy arrays stay int64)
/// ```
struct DataSpec {
  std::string format = "idx";  ///< idx | images | npy | raw | a format registered with register_data_reader
  std::string images;          ///< file (idx, npy) or folder (images, raw)
  std::string labels;          ///< idx/npy label file; "subfolders" for images (class = sorted folder index)
  /// x <- (pixel / 255 - mean[c]) / std[c] (idx, images); one value or one per channel.
  std::vector<double> mean{0.0}, std{1.0};
  int64_t resize = 0;          ///< images: shorter side resized to this (bilinear, antialiased as PIL); 0 keeps the size
  int64_t crop = 0;            ///< images: center crop to crop x crop; 0: none
  std::string color = "rgb";   ///< images: channel order rgb | bgr, or gray (ITU-R 601 luma)
  /// Several inputs: one source per model input (`input` set in each, in the
  /// model's input order); the fields above are then unused. Empty: one source.
  std::vector<DataSpec> inputs;
  std::string input;           ///< the model input this source feeds (an entry of `inputs`)
  /// True for one source per input. Labels, if any, are given in one input's source.
  bool per_input() const { return !inputs.empty(); }
  /// True if the section names any data (a source, or one per input); false for an
  /// optional section left out (ptq.auto_fallback.data).
  bool given() const { return !images.empty() || per_input(); }
};

/// One model input as a job feeds it: its name (the ONNX graph input / forward
/// argument), shape ([-1, ...]: -1 marks the batch and any other dynamic dim) and
/// element type ("float32", "int64" or "int32"; integer inputs are token ids,
/// masks, indices).
struct InputSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "float32";
};

/// A dataset read batch by batch: only the batch asked for is decoded and held,
/// so memory does not grow with the number of samples (npy files are the
/// exception: they are read whole).
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of selected samples.
  int64_t size() const { return static_cast<int64_t>(index_.size()); }
  /// Shape of one sample ([C, H, W] for images).
  const std::vector<int64_t>& sample_shape() const { return sample_shape_; }
  /// Element type of the samples: float32, or int64 for an npy array of integers
  /// (int32 arrays are widened).
  at::ScalarType dtype() const { return dtype_; }
  /// Selected samples [begin, end) as dtype() [end - begin, ...sample_shape].
  /// Throws DataError / IoError naming the file of a sample that cannot be read or
  /// does not fit the sample shape; ConfigError for data with several inputs
  /// (use batch_inputs).
  at::Tensor batch(int64_t begin, int64_t end);
  /// The selected samples at `positions` (indices into 0..size()-1, any order) as
  /// dtype() [positions.size(), ...sample_shape]; same errors as `batch`.
  at::Tensor gather(const std::vector<int64_t>& positions);
  /// Number of model inputs a sample feeds (1 unless the data has one source per input).
  virtual size_t num_inputs() const { return 1; }
  /// Selected samples [begin, end) of every input, in the model's input order.
  /// Same errors as `batch`, naming the input's file.
  virtual std::vector<at::Tensor> batch_inputs(int64_t begin, int64_t end) { return {batch(begin, end)}; }
  /// The samples at `positions` of every input, in the model's input order.
  virtual std::vector<at::Tensor> gather_inputs(const std::vector<int64_t>& positions) { return {gather(positions)}; }
  /// Labels of the selected samples, int64 [size()]; undefined without labels.
  const at::Tensor& labels() const { return labels_; }
  /// Where the data comes from (for messages).
  const std::string& source() const { return source_; }
  /// True if `read` may run on several threads at once: `batch` and `gather` then
  /// read a batch's samples on libtorch's threads (at::parallel_for). The built-in
  /// readers say true; a registered reader says false unless it overrides this.
  virtual bool concurrent_reads() const { return false; }

 protected:
  /// Writes sample `id` (an index into the whole dataset) into `dst` (sample_shape's numel floats).
  virtual void read(int64_t id, float* dst) = 0;
  /// Writes sample `id` as dtype() elements; float32 readers need not override it.
  /// A reader of integer samples (token ids, masks) sets `dtype_ = at::kLong` in its
  /// constructor and overrides this to write int64 values.
  virtual void read_typed(int64_t id, void* dst) { read(id, static_cast<float*>(dst)); }
  /// Selects `limit` of `total` samples (0: all); `seed` >= 0 picks them uniformly
  /// at random without replacement (std::mt19937_64), -1 takes the first ones.
  void select(int64_t total, int64_t limit, int64_t seed);
  std::vector<int64_t> index_;
  std::vector<int64_t> sample_shape_;
  at::Tensor labels_;        // of the selected samples
  at::ScalarType dtype_ = at::kFloat;
  std::string source_;
};

/// Builds the reader of one `format:` (see register_data_reader).
using DataReaderFactory = std::function<std::unique_ptr<Dataset>(const DataSpec& spec, const std::vector<int64_t>& input_shape,
                                                                 int64_t limit, int64_t seed)>;

/// Registers (or replaces) the reader of `format` (the `format:` key of a data
/// section): open_dataset builds it, and configs accept the name. The built-in
/// readers are idx, images, npy and raw.
void register_data_reader(const std::string& format, DataReaderFactory factory);

/// The registered formats, sorted.
std::vector<std::string> data_reader_formats();

/// Opens `spec` for a model input of shape `input_shape` ([-1, C, H, W]: the
/// batch dimension first; -1 in other dims accepts any size). Takes `limit`
/// samples (0: all), chosen with `seed` (see Dataset::select).
/// Throws ConfigError for an unregistered format (naming the registered ones),
/// IoError naming a missing file or folder, or an empty folder; DataError
/// naming the file when samples do not fit the input shape (channels, size) or
/// the labels' count differs from the samples'.
std::unique_ptr<Dataset> open_dataset(const DataSpec& spec, const std::vector<int64_t>& input_shape, int64_t limit = 0,
                                      int64_t seed = -1);

/// Opens the data of a model with `inputs`: one source (`spec` without per-input
/// sources) for a one-input model, or one per input (DataSpec::inputs, matched by
/// name). Every source takes the same `limit` samples with the same `seed`, so
/// sample i of each input belongs together; labels come from the one source that
/// has them. Throws ConfigError when a source is missing for an
/// input, names no input of the model, or several sources have labels; DataError
/// naming the files when the sources hold different numbers of samples, or a
/// source's element type does not fit its input (float32 data for an int64 input);
/// and what open_dataset throws.
std::unique_ptr<Dataset> open_inputs(const DataSpec& spec, const std::vector<InputSpec>& inputs, int64_t limit = 0,
                                     int64_t seed = -1);

/// Decodes a PNG or JPEG file (by content, not name) to 8-bit RGB, HWC
/// ([height, width, 3] uint8; gray images are replicated to three channels), with
/// libpng / libjpeg. Throws IoError naming `path` if it is missing or not a
/// readable PNG/JPEG.
at::Tensor decode_image(const std::string& path);

/// torchvision-style preprocessing of a decoded uint8 HWC RGB image: resize the
/// shorter side to `resize` (0: keep) with antialiased bilinear filtering (PIL's
/// BILINEAR), center crop to `crop` (0: none; torchvision's CenterCrop offsets),
/// convert to `color` (rgb, bgr, gray), scale to [0, 1] and normalise with
/// `mean`/`std` (one value or one per channel). Returns float32 [C, H, W].
/// Throws DataError if the image is smaller than the crop.
at::Tensor preprocess_image(const at::Tensor& hwc, const DataSpec& spec, const std::string& what);

}  // namespace qfx::quant
